package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CompletionCmd prints the snippet that makes a shell ask mcpdup for
// completions (answered by kongplete at startup).
type CompletionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"bash, zsh or fish."`
}

func (c *CompletionCmd) Help() string {
	return `Example (bash):
  mcpdup completion bash >> ~/.bashrc`
}

var completionScripts = map[string]string{
	"bash": "complete -C {bin} mcpdup\n",
	"zsh":  "autoload -U +X bashcompinit && bashcompinit\ncomplete -C {bin} mcpdup\n",
	"fish": `function __complete_mcpdup
    set -lx COMP_LINE (commandline -cp)
    test -z (commandline -ct)
    and set COMP_LINE "$COMP_LINE "
    {bin}
end
complete -f -c mcpdup -a "(__complete_mcpdup)"
`,
}

func (c *CompletionCmd) Run(g *Globals) error {
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return err
	}
	_, err = fmt.Fprint(g.stdout, strings.ReplaceAll(completionScripts[c.Shell], "{bin}", bin))
	return err
}
