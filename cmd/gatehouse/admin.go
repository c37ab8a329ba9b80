package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gatehouse-dev/gatehouse/store"
)

// withStore parses the common flags plus extra, opens the database (attaching to a
// running serve when there is one) and calls fn.
func withStore(ctx context.Context, name string, args []string, getenv func(string) string, stderr io.Writer,
	extra func(fs *flag.FlagSet), fn func(ctx context.Context, st *store.Store, fs *flag.FlagSet) error) error {
	var cfg config
	fs := newFlagSet(name, &cfg, getenv, stderr)
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger, err := newLogger(cfg.LogLevel, stderr)
	if err != nil {
		return err
	}
	db, err := openDatabase(ctx, &cfg, true, logger)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close(context.WithoutCancel(ctx)) }()
	return fn(ctx, db.store, fs)
}

func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return withStore(ctx, "migrate", args, getenv, stderr, nil, func(ctx context.Context, st *store.Store, _ *flag.FlagSet) error {
		// openDatabase has migrated already.
		fmt.Fprintln(stdout, "migrations applied")
		return nil
	})
}

func runUser(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: gatehouse user add --email E --role admin|viewer | gatehouse user list")
	}
	switch args[0] {
	case "add":
		var email, role string
		return withStore(ctx, "user add", args[1:], getenv, stderr, func(fs *flag.FlagSet) {
			fs.StringVar(&email, "email", "", "the user's email (required)")
			fs.StringVar(&role, "role", store.RoleViewer, "admin or viewer")
		}, func(ctx context.Context, st *store.Store, _ *flag.FlagSet) error {
			if email == "" {
				return errors.New("user add: --email is required")
			}
			password := getenv("GATEHOUSE_USER_PASSWORD")
			if password == "" {
				line, err := bufio.NewReader(stdin).ReadString('\n')
				if err != nil && !errors.Is(err, io.EOF) {
					return fmt.Errorf("user add: read password from stdin: %w", err)
				}
				password = strings.TrimRight(line, "\r\n")
			}
			if password == "" {
				return errors.New("user add: no password: set GATEHOUSE_USER_PASSWORD or write one line on stdin")
			}
			u, err := st.CreateUser(ctx, store.ActorSystem, email, password, role)
			if err != nil {
				return fmt.Errorf("user add: %w", err)
			}
			fmt.Fprintf(stdout, "added %s (%s)\n", u.Email, u.Role)
			return nil
		})
	case "list":
		return withStore(ctx, "user list", args[1:], getenv, stderr, nil, func(ctx context.Context, st *store.Store, _ *flag.FlagSet) error {
			users, err := st.ListUsers(ctx)
			if err != nil {
				return fmt.Errorf("user list: %w", err)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "EMAIL\tROLE\tCREATED")
			for _, u := range users {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Email, u.Role, u.CreatedAt.UTC().Format("2006-01-02 15:04"))
			}
			return tw.Flush()
		})
	default:
		return fmt.Errorf("user: unknown subcommand %q (want add or list)", args[0])
	}
}

func runToken(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		return errors.New("usage: gatehouse token create --name N [--role admin|viewer]")
	}
	var name, role string
	return withStore(ctx, "token create", args[1:], getenv, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&name, "name", "", "a name for the token (required)")
		fs.StringVar(&role, "role", store.RoleAdmin, "admin or viewer")
	}, func(ctx context.Context, st *store.Store, _ *flag.FlagSet) error {
		if name == "" {
			return errors.New("token create: --name is required")
		}
		_, secret, err := st.CreateAPIToken(ctx, store.ActorSystem, name, role)
		if err != nil {
			return fmt.Errorf("token create: %w", err)
		}
		fmt.Fprintln(stdout, secret)
		return nil
	})
}

func runKey(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		return errors.New("usage: gatehouse key create --name N")
	}
	var name string
	return withStore(ctx, "key create", args[1:], getenv, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&name, "name", "", "a name for the client key (required)")
	}, func(ctx context.Context, st *store.Store, _ *flag.FlagSet) error {
		if name == "" {
			return errors.New("key create: --name is required")
		}
		_, secret, err := st.CreateClientKey(ctx, store.ActorSystem, name)
		if err != nil {
			return fmt.Errorf("key create: %w", err)
		}
		fmt.Fprintln(stdout, secret)
		return nil
	})
}
