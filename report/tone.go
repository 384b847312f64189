package report

import "github.com/mcpdup/mcpdup/analyze"

// Tone is how loudly a finding is shown. The console's styles and the
// HTML report's colours both follow it, so the two agree; every finding
// also carries a word or a glyph, so nothing depends on the tone alone.
type Tone int

const (
	ToneCalm  Tone = iota // nothing to do
	ToneWarn              // look at it: a risk, an ambiguity, a repeat someone chose
	ToneAlarm             // act now
)

// SeverityTone is the tone of a suspect of severity s.
func SeverityTone(s analyze.Severity) Tone {
	switch s {
	case analyze.SeverityCritical, analyze.SeverityHigh:
		return ToneAlarm
	case analyze.SeverityMedium, analyze.SeverityLow:
		return ToneWarn
	}
	return ToneCalm
}

// Tone is the tone of a frame: a lost answer is an alarm.
func (f Frame) Tone() Tone {
	if f.Kind == FrameLost {
		return ToneAlarm
	}
	return ToneCalm
}
