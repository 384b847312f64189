package cells

import "testing"

func TestClipAndPad(t *testing.T) {
	for _, c := range []struct {
		s    string
		w    int
		want string
	}{
		{"deploy_release", 20, "deploy_release"},
		{"deploy_release", 8, "deploy_…"},
		{"✓ delivered", 5, "✓ de…"},
		{"abc", 0, ""},
		{"abc", 1, "…"},
	} {
		if got := Clip(c.s, c.w); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.s, c.w, got, c.want)
		}
	}
	if got := Pad("✓ ok", 6); got != "✓ ok  " {
		t.Errorf("Pad = %q", got)
	}
	if got := Pad("longer", 3); got != "longer" {
		t.Errorf("Pad must not cut: %q", got)
	}
}
