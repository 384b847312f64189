package gatewaylite

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/internal/tomlfile"
)

// Config is the gateway's TOML configuration. README.md documents every
// field with a complete example.
type Config struct {
	Listen string `toml:"listen"`
	// RunIdleTimeout ends a token-identified run after this much silence.
	RunIdleTimeout Duration `toml:"run_idle_timeout"`
	// SessionGrant is how a new run gets its per-session grant: "auto"
	// (granted and recorded) or "ask" (an operator approves it).
	SessionGrant string `toml:"session_grant"`
	// ApprovalTimeout bounds how long a call waits for an approval.
	ApprovalTimeout Duration `toml:"approval_timeout"`
	// AttachWait bounds how long a retry waits for a running execution
	// before answering "in progress".
	AttachWait  Duration                    `toml:"attach_wait"`
	Actors      []ActorConfig               `toml:"actor"`
	Tools       []ToolConfig                `toml:"tool"`
	Credentials map[string]CredentialConfig `toml:"credential"`
	Upstreams   []UpstreamConfig            `toml:"upstream"`
	Limits      LimitsConfig                `toml:"limits"`
	// DB is the database to record into when neither --db nor MCPDUP_DB
	// names one: a SQLite file, or a postgres:// URL replicas share.
	DB string `toml:"db"`
	// Replica names this gateway among replicas of one database (default:
	// the host name); each process still gets an id of its own.
	Replica string `toml:"replica"`
	// LeaseTTL is how long a replica's lease lasts unrenewed; past it,
	// another replica recovers the executions it left in flight.
	LeaseTTL Duration `toml:"lease_ttl"`

	path string
	// contractsOnly: read for the tools' contracts, not to serve.
	contractsOnly bool
}

// ActorConfig is an authenticated agent identity.
type ActorConfig struct {
	Name     string `toml:"name"`
	TokenEnv string `toml:"token_env"` // environment variable holding its bearer token
}

// ToolConfig declares one tool and its contract.
type ToolConfig struct {
	Name        string `toml:"name"`
	Description string `toml:"description"`
	Channel     string `toml:"channel"` // http
	Method      string `toml:"method"`
	// URL may hold {arg} placeholders, filled from the arguments (escaped).
	URL           string `toml:"url"`
	CredentialRef string `toml:"credential_ref"`
	Contract      string `toml:"contract"`
	// Fingerprint lists the argument fields that define the effect; empty
	// means all arguments.
	Fingerprint []string       `toml:"fingerprint"`
	Defaults    map[string]any `toml:"defaults"`
	// DefaultsPolicy is "materialise" (defaults always enter the
	// fingerprint and the request) or "omit" (a value equal to its default
	// is dropped from the fingerprint).
	DefaultsPolicy string `toml:"defaults_policy"`
	// SecretArgs are arguments whose values are secrets: they are sent to
	// the target but enter the record and fingerprint only keyed-hashed.
	SecretArgs   []string `toml:"secret_args"`
	AttachWindow Duration `toml:"attach_window"`
	Timeout      Duration `toml:"timeout"`
	InputSchema  string   `toml:"input_schema"`
	// StatusURL is the lookup endpoint of a recoverable_by_lookup tool, with
	// an {execution_id} placeholder.
	StatusURL string `toml:"status_url"`

	// SSH tools (channel = "ssh").
	Host string `toml:"host"`
	Port int    `toml:"port"` // 22 by default
	User string `toml:"user"`
	// HostKey pins the host: a known_hosts line, a public key line, or a
	// "SHA256:…" fingerprint. An unknown or changed key refuses the call.
	HostKey string `toml:"host_key"`
	// Command is the argv to run; {name} placeholders take arguments,
	// always as data (each word is shell-quoted on the wire).
	Command []string `toml:"command"`
	Workdir string   `toml:"workdir"`
	// MarkerDir, when set, runs the command under `mcpdup marker run` on
	// the host, so a dropped session can be recovered by reading the
	// marker (the tool is then recoverable_by_lookup).
	MarkerDir string `toml:"marker_dir"`
	// Helper is the mcpdup binary on the host ("mcpdup" on its PATH by
	// default).
	Helper string `toml:"helper"`
}

// CredentialConfig says how a credential reaches the target. The value is
// read from the environment and never stored.
type CredentialConfig struct {
	// KeyFile is an SSH private key (for ssh tools); it is read when the
	// gateway starts and never recorded.
	KeyFile string `toml:"key_file"`
	// PassphraseEnv names the environment variable holding KeyFile's
	// passphrase, for an encrypted key.
	PassphraseEnv string `toml:"passphrase_env"`
	// SSHAgent signs with the keys of the SSH agent at $SSH_AUTH_SOCK
	// instead of a key file: the private key never reaches the gateway.
	SSHAgent       bool   `toml:"ssh_agent"`
	Header         string `toml:"header"`
	ValueEnv       string `toml:"value_env"`
	Prefix         string `toml:"prefix"` // e.g. "Bearer "
	PerUseApproval bool   `toml:"per_use_approval"`
}

// UpstreamConfig is an MCP server whose tools the gateway re-exports.
type UpstreamConfig struct {
	Name            string   `toml:"name"`
	Command         []string `toml:"command"`
	URL             string   `toml:"url"`
	DefaultContract string   `toml:"default_contract"`
	// Tools gives written contracts to some of the upstream's tools.
	Tools map[string]UpstreamToolConfig `toml:"tools"`
}

// UpstreamToolConfig is the written contract of one upstream tool.
type UpstreamToolConfig struct {
	Contract     string   `toml:"contract"`
	Fingerprint  []string `toml:"fingerprint"`
	SecretArgs   []string `toml:"secret_args"`
	AttachWindow Duration `toml:"attach_window"`
}

// Duration is a time.Duration written as "90s", "1h".
type Duration struct{ time.Duration }

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: %w", b, err)
	}
	d.Duration = v
	return nil
}

func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Defaults for unset fields.
const (
	DefaultListen          = "127.0.0.1:8931"
	DefaultAttachWindow    = activity.DefaultAttachWindow
	DefaultTimeout         = 30 * time.Second
	DefaultRunIdleTimeout  = 30 * time.Minute
	DefaultApprovalTimeout = 2 * time.Minute
	DefaultAttachWait      = 10 * time.Second
)

// LoadConfig reads and validates a configuration file. Errors name the
// file and the offending field.
func LoadConfig(path string) (*Config, error) {
	b, err := tomlfile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	cfg.path = path
	return cfg, nil
}

// ParseConfig parses TOML configuration text and validates it.
func ParseConfig(b []byte) (*Config, error) { return parseConfig(b, false) }

// LoadContracts reads a configuration only for its tools' contracts (the
// analysis's what-if): it may name no [[actor]], since nothing will be
// served. Everything it does say is still checked.
func LoadContracts(path string) (*Config, error) {
	b, err := tomlfile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := parseConfig(b, true)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	cfg.path = path
	return cfg, nil
}

func parseConfig(b []byte, contractsOnly bool) (*Config, error) {
	var cfg Config
	if err := tomlfile.Decode(b, &cfg); err != nil {
		return nil, err
	}
	cfg.contractsOnly = contractsOnly
	if err := cfg.normalise(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

var (
	toolNameRE    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	placeholderRE = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)
)

func (c *Config) normalise() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	setDefault(&c.RunIdleTimeout, DefaultRunIdleTimeout)
	setDefault(&c.ApprovalTimeout, DefaultApprovalTimeout)
	setDefault(&c.AttachWait, DefaultAttachWait)
	setDefault(&c.LeaseTTL, DefaultLeaseTTL)
	if c.LeaseTTL.Duration < 100*time.Millisecond {
		return fmt.Errorf("lease_ttl %v: at least 100ms", c.LeaseTTL.Duration)
	}
	if err := c.Limits.normalise(); err != nil {
		return err
	}
	switch c.SessionGrant {
	case "":
		c.SessionGrant = "auto"
	case "auto", "ask":
	default:
		return fmt.Errorf("session_grant: %q is not auto or ask", c.SessionGrant)
	}
	if len(c.Actors) == 0 && !c.contractsOnly {
		return errors.New("no [[actor]]: every call must authenticate as a configured actor")
	}
	seen := map[string]bool{}
	for i, a := range c.Actors {
		if a.Name == "" || a.TokenEnv == "" {
			return fmt.Errorf("actor %d: name and token_env are required", i+1)
		}
		if seen["actor:"+a.Name] {
			return fmt.Errorf("actor %s: defined twice", a.Name)
		}
		seen["actor:"+a.Name] = true
	}
	for name, cr := range c.Credentials {
		switch {
		case cr.PassphraseEnv != "" && cr.KeyFile == "":
			return fmt.Errorf("credential.%s: passphrase_env needs key_file", name)
		case cr.KeyFile != "" && cr.SSHAgent:
			return fmt.Errorf("credential.%s: key_file and ssh_agent exclude each other", name)
		case cr.KeyFile == "" && !cr.SSHAgent && (cr.Header == "" || cr.ValueEnv == ""):
			return fmt.Errorf("credential.%s: header and value_env are required (or key_file or ssh_agent, for ssh tools)", name)
		}
	}
	for i := range c.Tools {
		if err := c.normaliseTool(&c.Tools[i], seen); err != nil {
			return err
		}
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if u.Name == "" || (len(u.Command) == 0) == (u.URL == "") {
			return fmt.Errorf("upstream %d: name and exactly one of command or url are required", i+1)
		}
		if u.DefaultContract == "" {
			u.DefaultContract = string(activity.ContractBlockedAfterUnknown)
		}
		if _, err := activity.ParseContract(u.DefaultContract); err != nil {
			return fmt.Errorf("upstream %s: default_contract: %w", u.Name, err)
		}
		for tn, t := range u.Tools {
			if _, err := activity.ParseContract(t.Contract); err != nil {
				return fmt.Errorf("upstream %s: tools.%s: contract: %w", u.Name, tn, err)
			}
		}
	}
	return nil
}

// normaliseSSHTool checks an ssh tool: where, as whom, the pinned host
// key, the key file, the command; its contract follows from the marker.
func (c *Config) normaliseSSHTool(t *ToolConfig, field func(string) string) error {
	switch {
	case t.Host == "":
		return errors.New(field("host") + ": required for an ssh tool")
	case t.User == "":
		return errors.New(field("user") + ": required for an ssh tool")
	case t.HostKey == "":
		return errors.New(field("host_key") + ": required: an ssh tool pins its host's key (known_hosts line or SHA256: fingerprint)")
	case len(t.Command) == 0:
		return errors.New(field("command") + ": required: the argv to run")
	case t.CredentialRef == "" || c.Credentials[t.CredentialRef].KeyFile == "" && !c.Credentials[t.CredentialRef].SSHAgent:
		return errors.New(field("credential_ref") + ": an ssh tool needs a credential with key_file or ssh_agent")
	}
	if t.Port == 0 {
		t.Port = 22
	}
	if t.Helper == "" {
		t.Helper = "mcpdup"
	}
	switch {
	case t.Contract == "" && t.MarkerDir != "":
		t.Contract = string(activity.ContractRecoverableByLookup)
	case t.Contract == "":
		t.Contract = string(activity.ContractBlockedAfterUnknown)
	}
	switch activity.Contract(t.Contract) {
	case activity.ContractRecoverableByLookup:
		if t.MarkerDir == "" {
			return errors.New(field("contract") + ": recoverable_by_lookup over ssh needs marker_dir (the lookup reads the host's marker)")
		}
	case activity.ContractRepeatableWithKey:
		return errors.New(field("contract") + ": repeatable_with_key needs an idempotency key, which ssh cannot send; use marker_dir")
	case activity.ContractReadOnly, activity.ContractBlockedAfterUnknown:
	default:
		return fmt.Errorf("%s: %q is not a contract", field("contract"), t.Contract)
	}
	t.Method = "exec"
	if err := placeholdersFingerprinted(t, t.Command...); err != nil {
		return errors.New(field("command") + err.Error())
	}
	setDefault(&t.AttachWindow, DefaultAttachWindow)
	setDefault(&t.Timeout, DefaultTimeout)
	if t.InputSchema == "" {
		t.InputSchema = `{"type":"object"}`
	}
	return nil
}

func (c *Config) normaliseTool(t *ToolConfig, seen map[string]bool) error {
	field := func(f string) string { return fmt.Sprintf("tool %s: %s", t.Name, f) }
	if !toolNameRE.MatchString(t.Name) {
		return fmt.Errorf("tool %q: name must be 1-64 letters, digits, '_', '-' or '.'", t.Name)
	}
	if seen["tool:"+t.Name] {
		return fmt.Errorf("tool %s: defined twice", t.Name)
	}
	if strings.HasPrefix(t.Name, reservedPrefix) {
		return fmt.Errorf("tool %s: the %s prefix is reserved for the gateway's own tools", t.Name, reservedPrefix)
	}
	seen["tool:"+t.Name] = true
	if t.Channel == "" {
		t.Channel = string(activity.ChannelHTTP)
	}
	if t.Channel == string(activity.ChannelSSH) {
		return c.normaliseSSHTool(t, field)
	}
	if t.Channel != string(activity.ChannelHTTP) {
		return fmt.Errorf("%s: %q is not supported (http or ssh; upstream MCP tools come from [[upstream]])", field("channel"), t.Channel)
	}
	if t.Method == "" {
		t.Method = "POST"
	}
	t.Method = strings.ToUpper(t.Method)
	if u, err := url.Parse(placeholderRE.ReplaceAllString(t.URL, "x")); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: %q is not an http(s) URL", field("url"), t.URL)
	}
	if t.Contract == "" {
		t.Contract = string(activity.ContractBlockedAfterUnknown) // no written contract
	}
	if _, err := activity.ParseContract(t.Contract); err != nil {
		return fmt.Errorf("%s: %w", field("contract"), err)
	}
	if t.Contract == string(activity.ContractRecoverableByLookup) && !strings.Contains(t.StatusURL, "{execution_id}") {
		return fmt.Errorf("%s: a recoverable_by_lookup tool needs a status_url with {execution_id}", field("status_url"))
	}
	if t.CredentialRef != "" {
		if _, ok := c.Credentials[t.CredentialRef]; !ok {
			return fmt.Errorf("%s: no [credential.%s]", field("credential_ref"), t.CredentialRef)
		}
	}
	switch t.DefaultsPolicy {
	case "":
		t.DefaultsPolicy = "materialise"
	case "materialise", "omit":
	default:
		return fmt.Errorf("%s: %q is not materialise or omit", field("defaults_policy"), t.DefaultsPolicy)
	}
	setDefault(&t.AttachWindow, DefaultAttachWindow)
	setDefault(&t.Timeout, DefaultTimeout)
	if t.InputSchema == "" {
		t.InputSchema = `{"type":"object"}`
	}
	var schema map[string]any
	if err := json.Unmarshal([]byte(t.InputSchema), &schema); err != nil || schema["type"] != "object" {
		return fmt.Errorf("%s: must be a JSON schema of type object", field("input_schema"))
	}
	if _, err := compileSchema([]byte(t.InputSchema)); err != nil {
		return fmt.Errorf("%s: %w", field("input_schema"), errors.Unwrap(err))
	}
	for _, m := range placeholderRE.FindAllStringSubmatch(t.URL, -1) {
		if slices.Contains(t.SecretArgs, m[1]) {
			return fmt.Errorf("%s: secret argument {%s} must not appear in the URL (URLs are logged)", field("url"), m[1])
		}
	}
	if err := placeholdersFingerprinted(t, t.URL); err != nil {
		return errors.New(field("url") + err.Error())
	}
	return nil
}

// placeholdersFingerprinted refuses a template argument a written
// fingerprint leaves out: it names the target (an order's refund, a
// host's service), so two calls that differ only there would be one
// intent, the second answered from the first and never sent.
func placeholdersFingerprinted(t *ToolConfig, templates ...string) error {
	if len(t.Fingerprint) == 0 {
		return nil // every argument is fingerprinted
	}
	for _, tmpl := range templates {
		for _, m := range placeholderRE.FindAllStringSubmatch(tmpl, -1) {
			if !slices.Contains(t.Fingerprint, m[1]) {
				return fmt.Errorf(": placeholder {%s} is not in fingerprint: two calls that differ only in %s would be one intent, the second answered from the first and never sent; add %q to fingerprint", m[1], m[1], m[1])
			}
		}
	}
	return nil
}

func setDefault(d *Duration, v time.Duration) {
	if d.Duration <= 0 {
		d.Duration = v
	}
}

// Tool returns the configured tool named name.
func (c *Config) Tool(name string) (*ToolConfig, bool) {
	for i := range c.Tools {
		if c.Tools[i].Name == name {
			return &c.Tools[i], true
		}
	}
	return nil, false
}

// Contract is a tool's written contract as the analysis's what-if reads
// it: its class and attach window; ok is false for a tool this
// configuration does not define.
func (c *Config) Contract(tool string) (activity.Contract, time.Duration, bool) {
	t, ok := c.Tool(tool)
	if !ok {
		return "", 0, false
	}
	return activity.Contract(t.Contract), t.AttachWindow.Duration, true
}
