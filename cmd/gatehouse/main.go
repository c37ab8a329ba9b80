// Command gatehouse runs the Gatehouse LLM gateway, its dashboard and REST API, and the
// administrative subcommands (migrate, user, token, key, config, demo-traffic).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(int(code))
		}
		fmt.Fprintln(os.Stderr, "gatehouse:", err)
		os.Exit(1)
	}
}

const usage = `usage: gatehouse <command> [flags]

commands:
  serve [--demo]                      run the gateway, dashboard and REST API
  migrate                             apply database migrations
  user add --email E --role admin|viewer
                                      add a user (password from GATEHOUSE_USER_PASSWORD or one line of stdin)
  user list                           list users
  user passwd --email E               set a user's password (as for user add); ends all their sessions
  token create --name N [--role admin|viewer]
                                      create a REST API token (prints only the secret)
  key create --name N                 create a gateway client key (prints only the secret)
  config export [--format yaml|json]  print the whole configuration as one document
  config diff FILE                    what applying FILE would change (exit 0 none, 2 changes)
  config apply FILE [--prune]         apply FILE in one transaction (see "gatehouse config --help")
  demo-traffic [--url U] [--key K | --data-dir D]
                                      send concurrent demo requests through a running gateway

Configuration comes from GATEHOUSE_* environment variables; flags mirror them
(run "gatehouse serve --help").
`

// run is the whole program: it parses args, wires the parts and runs the command until
// ctx is cancelled.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	err := runCommand(ctx, args, getenv, stdin, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		// "gatehouse serve --help" printed its flags as asked: that is a success.
		return nil
	}
	return err
}

// runCommand dispatches args to the subcommand they name.
func runCommand(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("missing command")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return runServe(ctx, rest, getenv, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, rest, getenv, stdout, stderr)
	case "user":
		return runUser(ctx, rest, getenv, stdin, stdout, stderr)
	case "token":
		return runToken(ctx, rest, getenv, stdout, stderr)
	case "key":
		return runKey(ctx, rest, getenv, stdout, stderr)
	case "config":
		return runConfig(ctx, rest, getenv, stdin, stdout, stderr)
	case "demo-traffic":
		return runDemoTraffic(ctx, rest, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}
