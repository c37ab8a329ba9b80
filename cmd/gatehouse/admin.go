package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/mail"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

// withStore parses the common flags plus extra, runs check (usage errors fail here,
// before any database is started), opens the database (attaching to a running serve
// when there is one) and calls fn.
func withStore(ctx context.Context, name string, args []string, getenv func(string) string, stderr io.Writer,
	extra func(fs *flag.FlagSet), check func() error, fn func(ctx context.Context, st *store.Store) error) error {
	var cfg config
	fs := newFlagSet(name, &cfg, getenv, stderr)
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q (see gatehouse %s --help)", name, fs.Arg(0), name)
	}
	if check != nil {
		if err := check(); err != nil {
			return err
		}
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
	return fn(ctx, db.store)
}

// isHelp reports whether arg asks a command group for its usage.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// checkRole is the CLI's check of a --role value.
func checkRole(cmd, role string) error {
	if role != store.RoleAdmin && role != store.RoleViewer {
		return fmt.Errorf("%s: --role must be %q or %q, not %q", cmd, store.RoleAdmin, store.RoleViewer, role)
	}
	return nil
}

func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return withStore(ctx, "migrate", args, getenv, stderr, nil, nil, func(ctx context.Context, st *store.Store) error {
		// openDatabase has migrated already.
		fmt.Fprintln(stdout, "migrations applied")
		return nil
	})
}

const userUsage = `usage:
  gatehouse user add --email E --role admin|viewer   add a user; the password comes from
                                                     GATEHOUSE_USER_PASSWORD, else one line of stdin
  gatehouse user list                                list the users
  gatehouse user passwd --email E                    set a user's password (from GATEHOUSE_USER_PASSWORD,
                                                     else one line of stdin); ends all their sessions
(run "gatehouse user add --help" for the flags)
`

func runUser(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, userUsage)
		return errors.New("user: missing subcommand (add, list or passwd)")
	}
	switch args[0] {
	case "add":
		var email, role, password string
		var err error
		return withStore(ctx, "user add", args[1:], getenv, stderr, func(fs *flag.FlagSet) {
			fs.StringVar(&email, "email", "", "the user's email (required)")
			fs.StringVar(&role, "role", store.RoleViewer, "admin or viewer")
		}, func() error {
			email = strings.TrimSpace(email)
			if email == "" {
				return errors.New("user add: --email is required")
			}
			// The same rule as the dashboard's users page.
			if a, err := mail.ParseAddress(email); err != nil || a.Address != email {
				return fmt.Errorf("user add: %q is not an email address", email)
			}
			if err := checkRole("user add", role); err != nil {
				return err
			}
			password, err = readPassword("user add", getenv, stdin)
			return err
		}, func(ctx context.Context, st *store.Store) error {
			u, err := st.CreateUser(ctx, store.ActorSystem, email, password, role)
			if errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("user add: a user with email %s exists already", email)
			}
			if err != nil {
				return fmt.Errorf("user add: %w", err)
			}
			fmt.Fprintf(stdout, "added %s (%s)\n", u.Email, u.Role)
			return nil
		})
	case "passwd":
		var email, password string
		var err error
		return withStore(ctx, "user passwd", args[1:], getenv, stderr, func(fs *flag.FlagSet) {
			fs.StringVar(&email, "email", "", "the user's email (required)")
		}, func() error {
			if email = strings.TrimSpace(email); email == "" {
				return errors.New("user passwd: --email is required")
			}
			password, err = readPassword("user passwd", getenv, stdin)
			return err
		}, func(ctx context.Context, st *store.Store) error {
			u, err := st.GetUserByEmail(ctx, email)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("user passwd: no user with email %s", email)
			}
			if err != nil {
				return fmt.Errorf("user passwd: %w", err)
			}
			// SetPassword ends every session of the user and writes the audit row.
			if err := st.SetPassword(ctx, store.ActorSystem, u.ID, password); err != nil {
				return fmt.Errorf("user passwd: %w", err)
			}
			fmt.Fprintf(stdout, "password of %s changed; their sessions have ended\n", u.Email)
			return nil
		})
	case "list":
		return withStore(ctx, "user list", args[1:], getenv, stderr, nil, nil, func(ctx context.Context, st *store.Store) error {
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
		if isHelp(args[0]) {
			fmt.Fprint(stdout, userUsage)
			return nil
		}
		fmt.Fprint(stderr, userUsage)
		return fmt.Errorf("user: unknown subcommand %q (want add, list or passwd)", args[0])
	}
}

// readPassword reads a new password as every user command does: from
// GATEHOUSE_USER_PASSWORD when set, else one line of stdin. cmd names the command
// in errors.
func readPassword(cmd string, getenv func(string) string, stdin io.Reader) (string, error) {
	password := getenv("GATEHOUSE_USER_PASSWORD")
	if password == "" {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("%s: read password from stdin: %w", cmd, err)
		}
		password = strings.TrimRight(line, "\r\n")
	}
	if password == "" {
		return "", fmt.Errorf("%s: no password: set GATEHOUSE_USER_PASSWORD or write one line on stdin", cmd)
	}
	return password, nil
}

const tokenUsage = `usage:
  gatehouse token create --name N [--role admin|viewer]   create a REST API token (default role admin);
                                                          prints only the secret
(run "gatehouse token create --help" for the flags)
`

func runToken(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, tokenUsage)
		return nil
	}
	if len(args) == 0 || args[0] != "create" {
		fmt.Fprint(stderr, tokenUsage)
		return errors.New("token: want the subcommand create")
	}
	var name, role string
	return withStore(ctx, "token create", args[1:], getenv, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&name, "name", "", "a name for the token (required)")
		fs.StringVar(&role, "role", store.RoleAdmin, "admin or viewer")
	}, func() error {
		if name == "" {
			return errors.New("token create: --name is required")
		}
		return checkRole("token create", role)
	}, func(ctx context.Context, st *store.Store) error {
		_, secret, err := st.CreateAPIToken(ctx, store.ActorSystem, name, role)
		if err != nil {
			return fmt.Errorf("token create: %w", err)
		}
		fmt.Fprintln(stdout, secret)
		return nil
	})
}

const keyUsage = `usage:
  gatehouse key create --name N [--weight W] [--max-concurrent C]
                                  create a gateway client key; prints only the secret
(run "gatehouse key create --help" for the flags)
`

func runKey(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, keyUsage)
		return nil
	}
	if len(args) == 0 || args[0] != "create" {
		fmt.Fprint(stderr, keyUsage)
		return errors.New("key: want the subcommand create")
	}
	var (
		name string
		lim  = map[string]int64{}
		in   store.ClientKeyInput
	)
	intFlag := func(fs *flag.FlagSet, flagName, key, usage string) {
		fs.Func(flagName, usage, func(v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return errors.New("must be a whole number")
			}
			lim[key] = n
			return nil
		})
	}
	return withStore(ctx, "key create", args[1:], getenv, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&name, "name", "", "a unique name for the client key: 1 to 64 of A-Z, a-z, 0-9, '.', '_', '-' (required)")
		intFlag(fs, "weight", limits.KeyWeight, "the key's share of a saturated gate, 1 to 1000 (default 1)")
		intFlag(fs, "max-concurrent", limits.KeyMaxConcurrent, "cap on the key's requests in flight, 0 to 10000 (0 = none)")
	}, func() error {
		if name == "" {
			return errors.New("key create: --name is required")
		}
		raw, err := json.Marshal(lim)
		if err != nil {
			return fmt.Errorf("key create: %w", err)
		}
		// The same rules as the API's, worded with the flag names.
		if _, errs := limits.DecodeClientKeyLimits(raw, ""); len(errs) > 0 {
			msgs := make([]string, 0, len(errs))
			for _, e := range errs {
				flagName := map[string]string{limits.KeyWeight: "--weight", limits.KeyMaxConcurrent: "--max-concurrent"}[e.Field]
				msgs = append(msgs, flagName+": "+e.Message)
			}
			return errors.New("key create: " + strings.Join(msgs, "; "))
		}
		in = store.NewClientKeyInput(name)
		in.Limits = raw
		return nil
	}, func(ctx context.Context, st *store.Store) error {
		_, secret, err := st.CreateClientKey(ctx, store.ActorSystem, in)
		if err != nil {
			return fmt.Errorf("key create: %w", err)
		}
		fmt.Fprintln(stdout, secret)
		return nil
	})
}
