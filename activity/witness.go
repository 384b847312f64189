package activity

// Reading witness files: the whole file for an audit, only what was
// appended since for a live store.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// maxWitnessLine bounds one line of a witness file (a signed checkpoint
// is a few hundred bytes).
const maxWitnessLine = 1 << 20

// ReadWitness returns the newest checkpoint a witness file holds (the
// zero line when there is none or no file). Lines a crash cut short are
// passed over.
func ReadWitness(path string) (WitnessLine, error) {
	var t witnessTail
	return t.read(path)
}

// witnessTail reads a witness file as it grows. A live store reads it
// before every proof and every seal, and the file gains a line per seal
// (one a minute at least, one per thousand records on a busy gateway):
// read whole each time, the reads grew with the gateway's age. The file
// is only ever appended to (appendWitness), so each read takes the lines
// added since the last; a file replaced (another inode) or cut shorter
// is read whole again.
type witnessTail struct {
	mu     sync.Mutex
	file   os.FileInfo // the file read so far
	offset int64       // the end of its last whole line read
	newest WitnessLine // the newest checkpoint of the lines before offset
}

func (t *witnessTail) read(path string) (WitnessLine, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		t.file, t.offset, t.newest = nil, 0, WitnessLine{}
		return WitnessLine{}, nil
	}
	if err != nil {
		return WitnessLine{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return WitnessLine{}, err
	}
	if t.file == nil || !os.SameFile(t.file, fi) || fi.Size() < t.offset {
		t.offset, t.newest = 0, WitnessLine{}
	}
	t.file = fi
	if fi.Size() == t.offset {
		return t.newest, nil
	}
	sc := bufio.NewScanner(io.NewSectionReader(f, t.offset, fi.Size()-t.offset))
	sc.Buffer(make([]byte, 0, 64<<10), maxWitnessLine)
	var tail []byte // an unterminated last line, read but not passed
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			return i + 1, data[:i+1], nil
		}
		if atEOF && len(data) > 0 {
			tail = data
			return len(data), nil, nil
		}
		return 0, nil, nil
	})
	for sc.Scan() {
		t.offset += int64(len(sc.Bytes()))
		t.newest = newestOf(t.newest, sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		return t.newest, fmt.Errorf("%s: %w", path, err)
	}
	// A line not yet ended counts if it reads whole, but is read again
	// next time: the line appended after it ends it first.
	return newestOf(t.newest, tail), nil
}

// newestOf is the newer of newest and the checkpoint line holds, if it
// holds one.
func newestOf(newest WitnessLine, line []byte) WitnessLine {
	var w WitnessLine
	if len(line) == 0 || json.Unmarshal(line, &w) != nil {
		return newest
	}
	if w.Size >= newest.Size {
		return w
	}
	return newest
}

// WitnessSpan reads a whole witness file for an audit: the oldest and
// newest checkpoints it holds, and how many of its lines hold none
// (garbage, or a line a crash cut short). A missing file is the zero
// span. A file whose oldest checkpoint is not the log's first says
// witnessing began late: the file was deleted and begun again, or the
// key directory was copied without it.
func WitnessSpan(path string) (oldest, newest WitnessLine, bad int, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return oldest, newest, 0, nil
	}
	if err != nil {
		return oldest, newest, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxWitnessLine)
	first := true
	for sc.Scan() {
		var w WitnessLine
		if json.Unmarshal(sc.Bytes(), &w) != nil || w.Checkpoint == "" {
			bad++
			continue
		}
		if first || w.Size < oldest.Size {
			oldest = w
		}
		if first || w.Size >= newest.Size {
			newest = w
		}
		first = false
	}
	if err := sc.Err(); err != nil {
		return oldest, newest, bad, fmt.Errorf("%s: %w", path, err)
	}
	return oldest, newest, bad, nil
}
