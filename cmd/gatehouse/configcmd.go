package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/handlers"
	"github.com/gatehouse-dev/gatehouse/handlers/api"
	"github.com/gatehouse-dev/gatehouse/store"
)

const configUsage = `usage:
  gatehouse config export [--format yaml|json]   print the whole configuration (settings,
                                                 connections, client keys; never a secret)
  gatehouse config diff FILE                     print what apply would change, field by field;
                                                 exit 0: no change, 2: changes, 1: error
  gatehouse config apply FILE [--prune]          validate FILE whole, then apply it in one
                                                 transaction; --prune deletes the connections and
                                                 client keys FILE does not name
FILE is YAML or JSON ("-" reads standard input). A connection's apiKey may be ${ENV_VAR},
read from this command's environment when its name starts with GATEHOUSE_SECRET_ or is
listed in --env-allow A,B; leave apiKey out to keep the stored key.
(run "gatehouse config apply --help" for the flags)
`

// exitCode is an error that only sets the process's exit status: the command has said
// everything already ("config diff" exits 2 when there are changes).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func runConfig(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, configUsage)
		return errors.New("config: missing subcommand (export, diff or apply)")
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "export":
		var format string
		return withStore(ctx, "config export", rest, getenv, stderr, func(fs *flag.FlagSet) {
			fs.StringVar(&format, "format", "yaml", "yaml or json")
		}, func() error {
			if format != "yaml" && format != "json" {
				return fmt.Errorf(`config export: --format must be "yaml" or "json", not %q`, format)
			}
			return nil
		}, func(ctx context.Context, st *store.Store) error {
			out, err := api.NewConfigTool(st, handlers.UpstreamDeny{}).Export(ctx, format)
			if err != nil {
				return fmt.Errorf("config export: %w", err)
			}
			_, err = stdout.Write(out)
			return err
		})
	case "diff", "apply":
		return runConfigApply(ctx, sub, rest, getenv, stdin, stdout, stderr)
	default:
		if isHelp(sub) {
			fmt.Fprint(stdout, configUsage)
			return nil
		}
		fmt.Fprint(stderr, configUsage)
		return fmt.Errorf("config: unknown subcommand %q (want export, diff or apply)", sub)
	}
}

// runConfigApply runs "config diff FILE" (a dry run) and "config apply FILE [--prune]".
// FILE is read and parsed before any database is opened, so a file that cannot be read
// or does not parse starts nothing.
func runConfigApply(ctx context.Context, sub string, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	name := "config " + sub
	var (
		prune    bool
		envAllow string
	)
	extra := func(fs *flag.FlagSet) {
		fs.BoolVar(&prune, "prune", false, "also delete the connections and client keys FILE does not name")
		fs.StringVar(&envAllow, "env-allow", "", "comma-separated names of environment variables an apiKey's ${ENV_VAR} may read besides GATEHOUSE_SECRET_*")
	}
	args, file, err := takeFileArg(name, args, getenv, extra)
	if err != nil {
		return err
	}
	var doc []byte
	return withStore(ctx, name, args, getenv, stderr, extra, func() error {
		if file == "" {
			return fmt.Errorf("%s: missing FILE (a YAML or JSON file, or - for standard input)", name)
		}
		var data []byte
		var err error
		if file == "-" {
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(file)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		doc, err = api.ConfigJSON(data)
		var fe limits.FieldErrors
		switch {
		case errors.As(err, &fe):
			return problemsError(name, file, fe, stderr)
		case err != nil:
			return fmt.Errorf("%s: %s: %w", name, file, err)
		}
		return nil
	}, func(ctx context.Context, st *store.Store) error {
		deny, err := upstreamDeny(getenv("GATEHOUSE_UPSTREAM_DENY"))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		plan, err := api.NewConfigTool(st, deny).Apply(ctx, api.ConfigActorCLI, doc, api.ApplyOptions{
			DryRun: sub == "diff", Prune: prune, Getenv: getenv, EnvAllow: splitList(envAllow),
		})
		var fe limits.FieldErrors
		switch {
		case errors.As(err, &fe):
			return problemsError(name, file, fe, stderr)
		case err != nil:
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprint(stdout, plan.Text())
		if sub == "diff" {
			if plan.Changed {
				return exitCode(2)
			}
			return nil
		}
		for _, ch := range plan.Changes {
			if ch.Secret != "" {
				fmt.Fprintf(stdout, "client key %s: %s (shown once; store it now)\n", ch.Name, ch.Secret)
			}
		}
		return nil
	})
}

// takeFileArg finds the one positional argument of args (FILE) and returns args
// without it, so flags may come before or after it. A second positional is left in
// args for withStore to reject.
func takeFileArg(name string, args []string, getenv func(string) string, extra func(*flag.FlagSet)) ([]string, string, error) {
	var cfg config
	fs := newFlagSet(name, &cfg, getenv, io.Discard)
	extra(fs)
	if err := fs.Parse(args); err != nil {
		return args, "", nil // withStore parses again and reports it (or prints the help)
	}
	if fs.NArg() == 0 {
		return args, "", nil
	}
	i := len(args) - fs.NArg()
	if args[i] == "--" {
		i++
		if i == len(args) {
			return args[:i-1], "", nil
		}
		return append(append([]string{}, args[:i-1]...), args[i+1:]...), args[i], nil
	}
	return append(append([]string{}, args[:i]...), args[i+1:]...), args[i], nil
}

// problemsError prints every problem of a configuration file on stderr, one a line, and
// returns the error that ends the command with status 1.
func problemsError(name, file string, fe limits.FieldErrors, stderr io.Writer) error {
	for _, e := range fe {
		field := e.Field
		if field == "" {
			field = "(document)"
		}
		fmt.Fprintf(stderr, "%s: %s\n", field, e.Message)
	}
	noun := "problems"
	if len(fe) == 1 {
		noun = "problem"
	}
	return fmt.Errorf("%s: %s has %d %s (listed above); nothing was changed", name, strings.TrimSpace(file), len(fe), noun)
}

// upstreamDeny parses GATEHOUSE_UPSTREAM_DENY; unset is handlers.DefaultUpstreamDeny.
func upstreamDeny(v string) (handlers.UpstreamDeny, error) {
	if v == "" {
		v = handlers.DefaultUpstreamDeny
	}
	d, err := handlers.ParseUpstreamDeny(v)
	if err != nil {
		return handlers.UpstreamDeny{}, fmt.Errorf("GATEHOUSE_UPSTREAM_DENY: %w", err)
	}
	return d, nil
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
