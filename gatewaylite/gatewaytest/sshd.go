package gatewaytest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// SSHD is a real OpenSSH server on a loopback port, with a throwaway host
// key and one authorised user key, for the SSH channel's end-to-end
// tests. .ci/run installs openssh-server.
type SSHD struct {
	Addr        string
	Port        int
	User        string
	HostKeyLine string // the host's public key line, to pin
	UserKeyFile string // the private key the gateway logs in with
	Dir         string
}

// StartSSHD starts sshd as the test's own user and stops it at cleanup.
func StartSSHD(t testing.TB) *SSHD {
	t.Helper()
	bin, err := exec.LookPath("sshd")
	if err != nil {
		bin = "/usr/sbin/sshd"
		if _, err := os.Stat(bin); err != nil {
			t.Fatal("these tests need OpenSSH's sshd (Debian: apt-get install openssh-server; .ci/run does it)")
		}
	}
	dir := t.TempDir()
	keygen := func(name string) {
		out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", filepath.Join(dir, name)).CombinedOutput()
		if err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	keygen("host_key")
	keygen("user_key")
	pub, _ := os.ReadFile(filepath.Join(dir, "user_key.pub"))
	os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600)
	hostPub, _ := os.ReadFile(filepath.Join(dir, "host_key.pub"))
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	conf := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile %s
AuthorizedKeysFile %s
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
AllowUsers %s
LogLevel ERROR
`, port, filepath.Join(dir, "host_key"), filepath.Join(dir, "sshd.pid"), filepath.Join(dir, "authorized_keys"), u.Username)
	os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(conf), 0o600)
	os.MkdirAll("/run/sshd", 0o755) // privilege separation directory
	cmd := exec.Command(bin, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not listen on %s: %s", addr, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &SSHD{Addr: addr, Port: port, User: u.Username, HostKeyLine: strings.TrimSpace(string(hostPub)),
		UserKeyFile: filepath.Join(dir, "user_key"), Dir: dir}
}

// NewUserKey makes another key the server accepts, encrypted with
// passphrase when it is not empty, and returns its private key file.
func (s *SSHD) NewUserKey(t testing.TB, name, passphrase string) string {
	t.Helper()
	path := filepath.Join(s.Dir, name)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", name, "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(s.Dir, "authorized_keys"), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(pub); err != nil {
		t.Fatal(err)
	}
	return path
}

// StartAgent runs ssh-agent holding the given keys and returns its socket,
// for SSH_AUTH_SOCK.
func StartAgent(t testing.TB, keys ...string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	cmd := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := cmd.Start(); err != nil {
		t.Fatalf("ssh-agent: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ssh-agent did not create its socket")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, k := range keys {
		add := exec.Command("ssh-add", k)
		add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		if out, err := add.CombinedOutput(); err != nil {
			t.Fatalf("ssh-add %s: %v\n%s", k, err, out)
		}
	}
	return sock
}
