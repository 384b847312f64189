package spool

import (
	"fmt"
	"io"
	"os"
	"testing"
)

func TestHighestRankFirstInOrderWritten(t *testing.T) {
	s := New()
	for i, r := range []int{1, 3, 1, 0, 3} {
		w, err := s.Writer("rows", r)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(w, "%d:%d\n", r, i)
	}
	w, _ := s.Writer("other", 9)
	io.WriteString(w, "x\n")
	rd, err := s.Reader("rows")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rd)
	if want := "3:1\n3:4\n1:0\n1:2\n0:3\n"; string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	dir := s.dir
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the spool's files are still there: %v", err)
	}
}

func TestEmptySpoolMakesNoFile(t *testing.T) {
	s := New()
	rd, err := s.Reader("rows")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(rd); len(b) != 0 || s.dir != "" {
		t.Fatalf("an empty spool read %q, dir %q", b, s.dir)
	}
	s.Close()
}
