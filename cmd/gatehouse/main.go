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

gatehouse serve [--demo]                            # gateway, dashboard and REST API; flags mirror GATEHOUSE_* (serve --help)
gatehouse migrate                                   # apply the database migrations
gatehouse user add --email E --role admin|viewer    # password: GATEHOUSE_USER_PASSWORD or one line of stdin
gatehouse user list
gatehouse user passwd --email E                     # password as for user add; ends all their sessions
gatehouse token create --name N [--role viewer]     # prints only the secret (default role admin)
gatehouse key create --name N [--weight W] [--max-concurrent C]   # prints only the secret; usable at once
gatehouse config export [--format yaml|json]        # the whole configuration as one document
gatehouse config diff FILE                          # what apply would change; exit 0 none, 2 changes, 1 error
gatehouse config apply FILE [--prune] [--env-allow NAME,…]   # validate all, then one transaction; --prune deletes what FILE leaves out
gatehouse demo-traffic [--url U] [--key K | --data-dir D] [--concurrency N] [--duration D]   # load for the demo's gates

Every command and command group answers --help (exit status 0). Exit status 1: an error,
or a usage error (a missing --name or --email, a bad --role, an argument that is not a
flag), which fails before any database is started; 2: config diff found changes.
Configuration comes from GATEHOUSE_* environment variables (gatehouse serve --help).
`

// run is the whole program: it parses args, wires the parts and runs the command until
// ctx is cancelled.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	setRedisLogger(stderr)
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
