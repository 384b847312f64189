package gatewaylite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/marker"
)

// sshTarget runs a tool's command on a host over SSH (golang.org/x/crypto/ssh).
// The host key is pinned: an unknown or changed key refuses the call
// before anything is sent. The private key is read from the credential's
// key file when the gateway starts and never recorded. With a marker
// directory the command runs under `mcpdup marker run` on the host, so
// after a dropped session `marker status` says what became of it.
type sshTarget struct {
	tool    *ToolConfig
	addr    string
	user    string
	signer  ssh.Signer // nil: sign with the SSH agent at agent
	agent   string     // the agent's socket, when the credential uses one
	hostKey func(key ssh.PublicKey) error
	pinned  string // SHA256 fingerprint of the pinned host key
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
}

func newSSHTarget(t *ToolConfig, creds map[string]CredentialConfig) (*sshTarget, error) {
	c := creds[t.CredentialRef]
	var signer ssh.Signer
	var agentSock string
	if c.SSHAgent {
		if agentSock = os.Getenv("SSH_AUTH_SOCK"); agentSock == "" {
			return nil, fmt.Errorf("tool %s: credential %s: ssh_agent: SSH_AUTH_SOCK is not set", t.Name, t.CredentialRef)
		}
	} else {
		var err error
		if signer, err = readSigner(c); err != nil {
			return nil, fmt.Errorf("tool %s: credential %s: %w", t.Name, t.CredentialRef, err)
		}
	}
	pin, check, err := parseHostKey(t.HostKey)
	if err != nil {
		return nil, fmt.Errorf("tool %s: host_key: %w", t.Name, err)
	}
	var d net.Dialer
	return &sshTarget{tool: t, addr: net.JoinHostPort(t.Host, strconv.Itoa(t.Port)), user: t.User, signer: signer, agent: agentSock,
		hostKey: check, pinned: pin, dial: d.DialContext}, nil
}

// readSigner reads the credential's private key file, decrypting it with
// the passphrase from passphrase_env when it names one.
func readSigner(c CredentialConfig) (ssh.Signer, error) {
	pem, err := os.ReadFile(c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("key_file: %w", err)
	}
	if c.PassphraseEnv == "" {
		signer, err := ssh.ParsePrivateKey(pem)
		if _, encrypted := err.(*ssh.PassphraseMissingError); encrypted {
			return nil, fmt.Errorf("key_file %s is encrypted: name its passphrase's variable in passphrase_env", c.KeyFile)
		}
		if err != nil {
			return nil, fmt.Errorf("key_file %s: %w", c.KeyFile, err)
		}
		return signer, nil
	}
	pass, ok := os.LookupEnv(c.PassphraseEnv)
	if !ok {
		return nil, fmt.Errorf("passphrase_env: %s is not set", c.PassphraseEnv)
	}
	signer, err := ssh.ParsePrivateKeyWithPassphrase(pem, []byte(pass))
	if err != nil {
		return nil, fmt.Errorf("key_file %s with the passphrase from %s: %w", c.KeyFile, c.PassphraseEnv, err)
	}
	return signer, nil
}

// auth is how the client proves its identity: the key file's signer, or
// the agent's keys over a connection the caller closes after the handshake.
func (s *sshTarget) auth(ctx context.Context) (ssh.AuthMethod, io.Closer, error) {
	if s.signer != nil {
		return ssh.PublicKeys(s.signer), io.NopCloser(nil), nil
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", s.agent)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh agent: %w", err)
	}
	return ssh.PublicKeysCallback(agent.NewClient(conn).Signers), conn, nil
}

// parseHostKey reads a pin: a known_hosts line or an authorized-key line
// ("[host]:port ssh-ed25519 AAAA…", "ssh-ed25519 AAAA…"), or a
// "SHA256:…" fingerprint. It returns the fingerprint and the check.
func parseHostKey(pin string) (string, func(ssh.PublicKey) error, error) {
	pin = strings.TrimSpace(pin)
	want := pin
	if !strings.HasPrefix(pin, "SHA256:") {
		key, err := parseKeyLine(pin)
		if err != nil {
			return "", nil, err
		}
		want = ssh.FingerprintSHA256(key)
	}
	return want, func(key ssh.PublicKey) error {
		if got := ssh.FingerprintSHA256(key); got != want {
			return fmt.Errorf("host key %s is not the pinned %s: refusing to connect", got, want)
		}
		return nil
	}, nil
}

func parseKeyLine(line string) (ssh.PublicKey, error) {
	if _, _, key, _, _, err := ssh.ParseKnownHosts([]byte(line)); err == nil {
		return key, nil
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return nil, errors.New("not a known_hosts line, a public key line, or a SHA256: fingerprint")
	}
	return key, nil
}

// target is the canonical target: account, address and host key identity.
func (s *sshTarget) target() string { return s.user + "@" + s.addr + " " + s.pinned }

// method is the canonical command: the argv template and the working
// directory. With the arguments it fixes what runs, without holding a
// secret argument's value.
func (s *sshTarget) method() string {
	m := "exec " + strings.Join(quoteArgv(s.tool.Command), " ")
	if s.tool.Workdir != "" {
		m += " in " + s.tool.Workdir
	}
	return m
}

// argv fills the command template: a {name} placeholder takes the
// argument's value, as a whole element or inside one.
func (s *sshTarget) argv(args map[string]any) ([]string, error) {
	out := make([]string, len(s.tool.Command))
	for i, el := range s.tool.Command {
		var missing error
		out[i] = placeholderRE.ReplaceAllStringFunc(el, func(m string) string {
			name := m[1 : len(m)-1]
			v, ok := args[name]
			if !ok {
				missing = fmt.Errorf("argument %q is missing", name)
				return ""
			}
			return argString(v)
		})
		if missing != nil {
			return nil, missing
		}
	}
	return out, nil
}

func argString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// shellQuote makes s one word for a POSIX shell, whatever it holds:
// single quotes around it, each single quote inside written as '\”. The
// remote side of SSH always hands the command line to the user's shell,
// so every word goes through here; nothing in an argument is code.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func quoteArgv(argv []string) []string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return q
}

// commandLine is what the host's shell runs for an execution.
func (s *sshTarget) commandLine(id activity.ExecutionID, argv []string) string {
	if s.tool.MarkerDir != "" {
		line := []string{s.tool.Helper, "marker", "run", "--id", string(id), "--dir", s.tool.MarkerDir}
		if s.tool.Workdir != "" {
			line = append(line, "--workdir", s.tool.Workdir)
		}
		return strings.Join(quoteArgv(append(append(line, "--"), argv...)), " ")
	}
	cmd := "exec " + strings.Join(quoteArgv(argv), " ")
	if s.tool.Workdir != "" {
		cmd = "cd " + shellQuote(s.tool.Workdir) + " && " + cmd
	}
	return cmd
}

// session connects and opens a session on the host; the caller closes
// both.
func (s *sshTarget) session(ctx context.Context) (*ssh.Client, *ssh.Session, error) {
	client, err := s.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	sess, err := client.NewSession()
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return client, sess, nil
}

// connect opens an authenticated client; a failure here means nothing was
// sent.
func (s *sshTarget) connect(ctx context.Context) (*ssh.Client, error) {
	conn, err := s.dial(ctx, "tcp", s.addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	auth, agentConn, err := s.auth(ctx)
	if err != nil {
		conn.Close()
		return nil, err
	}
	defer agentConn.Close()
	cc, chans, reqs, err := ssh.NewClientConn(conn, s.addr, &ssh.ClientConfig{
		User: s.user, Auth: []ssh.AuthMethod{auth},
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error { return s.hostKey(key) },
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return ssh.NewClient(cc, chans, reqs), nil
}

// dispatch runs the command. A failure before the session starts is
// failed_before_dispatch (safe to send again); an exit status is the
// outcome; a connection lost after the start is unknown: the command may
// still be running on the host.
func (s *sshTarget) dispatch(ctx context.Context, id activity.ExecutionID, args map[string]any) Outcome {
	argv, err := s.argv(args)
	if err != nil {
		return Outcome{State: activity.StateFailedBefore, Reason: "command: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, s.tool.Timeout.Duration)
	defer cancel()
	client, sess, err := s.session(ctx)
	if err != nil {
		return Outcome{State: activity.StateFailedBefore, Reason: "ssh: no session, nothing sent: " + err.Error()}
	}
	defer client.Close()
	defer sess.Close()
	var out bounded
	sess.Stdout, sess.Stderr = &out, &out
	done := make(chan error, 1)
	go func() { done <- sess.Run(s.commandLine(id, argv)) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		client.Close()
		return Outcome{State: activity.StateUnknown, Reason: "ssh: timed out after the command was sent; it may still be running on the host"}
	}
	o := sshOutcome(err, out.String(), s.tool.MarkerDir != "")
	if s.tool.MarkerDir != "" && o.State == activity.StateFailed {
		return s.confirmFailure(context.WithoutCancel(ctx), id, o)
	}
	return o
}

// confirmFailure reads the marker of a command whose helper exited other
// than 0: the helper exits with the command's code, but also with 125
// when the marker itself failed (a read-only marker directory after the
// command started) and with 128+n when it is killed while the command
// goes on. Only the marker tells which: a failure is the command's only
// when the marker records that very end; else the outcome is unknown (it
// read "the command exited with 137", a failure, and a retry ran the
// command a second time).
func (s *sshTarget) confirmFailure(ctx context.Context, id activity.ExecutionID, o Outcome) Outcome {
	m := s.lookup(ctx, id)
	if m.State == activity.StateFailed && m.ExitCode == o.ExitCode {
		o.Reason += " (the host's marker records it)"
		return o
	}
	m.Reason = fmt.Sprintf("the command's helper exited with %d, which the host's marker does not record as the command's end: %s", o.ExitCode.V, m.Reason)
	if m.State == activity.StateSucceeded {
		return m // the command itself succeeded; its helper failed after
	}
	m.State, m.Result = activity.StateUnknown, nil
	return m
}

func sshOutcome(err error, output string, withMarker bool) Outcome {
	var exit *ssh.ExitError
	switch {
	case err == nil:
		return Outcome{State: activity.StateSucceeded, ExitCode: activity.Some(0), Result: commandResult(0, output)}
	case errors.As(err, &exit):
		code := exit.ExitStatus()
		if withMarker && code == 125 && strings.Contains(output, marker.ErrStarted.Error()) {
			return Outcome{State: activity.StateUnknown, Reason: "the host's marker says this execution was already started: read its status"}
		}
		return Outcome{State: activity.StateFailed, ExitCode: activity.Some(code), Result: commandResult(code, output),
			Reason: fmt.Sprintf("the command exited with %d", code)}
	}
	return Outcome{State: activity.StateUnknown, Reason: "ssh: the connection was lost after the command started (" + err.Error() + "); it may still be running on the host"}
}

// lookup reads the execution's marker on the host: done gives the outcome
// and the output; absent means it never started; running or lost leave
// the outcome unknown.
func (s *sshTarget) lookup(ctx context.Context, id activity.ExecutionID) Outcome {
	if s.tool.MarkerDir == "" {
		return Outcome{State: activity.StateUnknown, Reason: "no marker on this tool: verify on the host"}
	}
	ctx, cancel := context.WithTimeout(ctx, s.tool.Timeout.Duration)
	defer cancel()
	client, sess, err := s.session(ctx)
	if err != nil {
		return Outcome{State: activity.StateUnknown, Reason: "marker status: " + err.Error()}
	}
	defer client.Close()
	defer sess.Close()
	line := strings.Join(quoteArgv([]string{s.tool.Helper, "marker", "status", "--id", string(id), "--dir", s.tool.MarkerDir, "-o", "json"}), " ")
	b, err := sess.Output(line)
	if err != nil {
		return Outcome{State: activity.StateUnknown, Reason: "marker status: " + err.Error()}
	}
	var rec marker.Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return Outcome{State: activity.StateUnknown, Reason: "marker status: " + err.Error()}
	}
	switch rec.State {
	case marker.Done:
		o := sshOutcome(nil, rec.Output, true)
		if code := *rec.ExitCode; code != 0 {
			o = Outcome{State: activity.StateFailed, ExitCode: activity.Some(code), Result: commandResult(code, rec.Output),
				Reason: fmt.Sprintf("the host's marker records exit code %d", code)}
		} else {
			o.Reason = "the host's marker records exit code 0"
		}
		return o
	case marker.Absent:
		return Outcome{State: activity.StateUnknown, NeverStarted: true,
			Reason: "the host has no marker for it: the command has not started"}
	case marker.Running:
		return Outcome{State: activity.StateUnknown, Running: true, Reason: fmt.Sprintf("still running on the host (pid %d, started %s)", rec.PID, rec.StartedAt.Format("15:04:05"))}
	}
	return Outcome{State: activity.StateUnknown, Reason: "the host's marker shows it started and its process is gone without an end: verify on the host"}
}

// commandResult renders a command's end as an MCP tool result.
func commandResult(code int, output string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"content":           []map[string]any{{"type": "text", "text": output}},
		"structuredContent": map[string]any{"exit_code": code, "output": output},
		"isError":           code != 0,
	})
	return b
}

// bounded keeps the first maxResultBytes of a command's output.
type bounded struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *bounded) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := maxResultBytes - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *bounded) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var _ io.Writer = (*bounded)(nil)
