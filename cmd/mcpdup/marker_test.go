package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/marker"
)

// TestMarkerSurvivesHangUp runs the real helper the way sshd does, in its
// own session, then does what a dropped connection does: closes its
// output and sends SIGHUP to its process group. The command must finish,
// its end must be recorded, and a second run of the id must be refused
// without running it again.
func TestMarkerSurvivesHangUp(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	effect := filepath.Join(dir, "effect")
	markers := filepath.Join(dir, "markers")
	cmd := exec.Command(bin, "marker", "run", "--id", "act_hup", "--dir", markers, "--",
		"sh", "-c", `echo started; sleep 1; echo ran >> "$0"; echo finished`, effect)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	out.Read(buf) // "started": the command is running
	out.Close()   // the session's channel is gone
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	deadline := time.Now().Add(10 * time.Second)
	var rec marker.Record
	for {
		b, err := exec.Command(bin, "marker", "status", "--id", "act_hup", "--dir", markers, "-o", "json").Output()
		if err != nil {
			t.Fatal(err)
		}
		rec = marker.Record{}
		json.Unmarshal(b, &rec)
		if rec.State == marker.Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never done: %+v", rec)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if *rec.ExitCode != 0 || rec.Output != "started\nfinished\n" {
		t.Fatalf("record after the hang-up: %+v", rec)
	}
	again := exec.Command(bin, "marker", "run", "--id", "act_hup", "--dir", markers, "--", "sh", "-c", `echo ran >> "$0"`, effect)
	if err := again.Run(); again.ProcessState.ExitCode() != 125 {
		t.Fatalf("a second run: %v", err)
	}
	if b, _ := os.ReadFile(effect); string(b) != "ran\n" {
		t.Fatalf("the command ran %q", b)
	}
}
