package activity

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestWitnessTailReadsLikeAWholeRead: a store's witness reader takes only
// the lines appended since its last read, and after every change a file
// can undergo (a line appended, a line cut short by a crash then ended by
// the next append, a line not yet ended, the file replaced, cut shorter,
// removed) it says what reading the whole file says.
func TestWitnessTailReadsLikeAWholeRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.witness")
	var tail witnessTail
	check := func(step string, want int64) {
		t.Helper()
		whole, err := ReadWitness(path)
		if err != nil {
			t.Fatalf("%s: whole read: %v", step, err)
		}
		got, err := tail.read(path)
		if err != nil {
			t.Fatalf("%s: tail read: %v", step, err)
		}
		if got != whole || got.Size != want {
			t.Fatalf("%s: tail read %d, whole read %d, want %d", step, got.Size, whole.Size, want)
		}
	}
	line := func(size int64) string {
		return fmt.Sprintf(`{"size":%d,"checkpoint":"origin\n%d\nroot\n"}`, size, size)
	}
	appendRaw := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	witness := func(size int64) {
		if err := appendWitness(path, Checkpoint{Size: size, Note: []byte(line(size))}); err != nil {
			t.Fatal(err)
		}
	}

	check("no file", 0)
	for _, n := range []int64{10, 20, 30} {
		witness(n)
		check(fmt.Sprintf("witnessed %d", n), n)
	}
	full := line(40)
	appendRaw(full[:len(full)/2]) // a crash mid-line
	check("a line cut short", 30)
	witness(50) // ends the cut line first
	check("the next line after it", 50)
	appendRaw(line(60)) // whole but not yet ended
	check("a line not yet ended", 60)
	appendRaw("\n")
	witness(70)
	check("ended, and one more", 70)
	witness(65) // an older checkpoint witnessed later changes nothing
	check("an older one appended", 70)

	// Replaced by another file (a new inode), even a longer one.
	other := path + ".new"
	var longer []byte
	for n := range int64(20) {
		longer = append(longer, line(5+n)+"\n"...)
	}
	if st, err := os.Stat(path); err != nil || st.Size() >= int64(len(longer)) {
		t.Fatalf("the replacement must be longer than the file read so far (%v)", err)
	}
	if err := os.WriteFile(other, longer, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	check("replaced by another file", 24)
	// Cut shorter in place.
	if err := os.Truncate(path, int64(len(line(5))+1)); err != nil {
		t.Fatal(err)
	}
	check("cut shorter", 5)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	check("removed", 0)
	witness(3)
	check("created again", 3)
}
