// Command ferretdb-arbiter runs FerretDB (MongoDB wire protocol on SQLite, or on PostgreSQL
// with -postgresql-url) for Arbiter's store tests and benchmarks. It embeds the library package
// because the upstream cmd/ferretdb binary built with `go install` panics on a missing version file.
// Clients reach FerretDB through the proxy of proxy.go, which serialises the write commands FerretDB
// runs as a read followed by a separate write, so that conditional updates are atomic, as on MongoDB.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:27017", "TCP address to listen on (the proxy; FerretDB itself listens on a Unix socket in -dir)")
	dir := flag.String("dir", "", "directory for the SQLite database files and FerretDB's socket (created if missing)")
	postgresqlURL := flag.String("postgresql-url", "", "PostgreSQL connection string: the postgresql backend instead of SQLite")
	serialise := flag.String("serialise", "", "comma-separated write commands the proxy serialises, or none (default: the backend's, see serialisedByDefault)")
	lock := flag.String("lock", "", "what a serialised command waits for: `global` (every other one) or `document` (the others on its document; default: the backend's, see lockByDefault)")
	flag.Parse()

	handler := "sqlite"
	if *postgresqlURL != "" {
		handler = "postgresql"
	}
	policy := serialisation{commands: serialisedByDefault[handler], perDocument: lockByDefault[handler] == "document"}
	if *serialise != "" {
		policy.commands = parseCommands(*serialise)
	}
	if *lock != "" {
		if *lock != "global" && *lock != "document" {
			fmt.Fprintln(os.Stderr, "ferretdb-arbiter: -lock must be global or document")
			os.Exit(2)
		}
		policy.perDocument = *lock == "document"
	}
	if err := run(*listen, *dir, handler, *postgresqlURL, policy); err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb-arbiter:", err)
		os.Exit(1)
	}
}

func run(listen, dir, handler, postgresqlURL string, policy serialisation) error {
	if dir == "" {
		return fmt.Errorf("-dir is required")
	}
	sqliteURL, err := sqliteDirURL(dir)
	if err != nil {
		return err
	}

	// Errors only: at warning level FerretDB logs every error reply it sends.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

	// FerretDB listens only on a socket next to its files, so every client goes through the proxy.
	socket := filepath.Join(dir, "ferretdb.sock")
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		return err
	}

	// The embeddable package disables telemetry itself (state.DisableTelemetry).
	server, err := ferretdb.New(&ferretdb.Config{
		Listener:      ferretdb.ListenerConfig{Unix: socket},
		Logger:        logger,
		Handler:       handler,
		SQLiteURL:     sqliteURL,
		PostgreSQLURL: postgresqlURL,
	})
	if err != nil {
		return err
	}

	listener, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		listener.Close()
	}()
	proxy := newProxy(policy, func() (net.Conn, error) { return net.Dial("unix", socket) }, logger)
	go proxy.stats.writeEverySecond(ctx, filepath.Join(dir, "proxy-stats.json"))
	proxyDone := make(chan error, 1)
	go func() {
		proxyDone <- proxy.serve(listener)
		stop() // a proxy that stopped accepting takes FerretDB down with it
	}()

	runErr := server.Run(ctx)
	stop() // and a FerretDB that stopped takes the proxy down (its listener closes)
	return errors.Join(runErr, <-proxyDone)
}

// sqliteDirURL turns a directory into the `file:<abs dir>/` URL FerretDB requires
// (it insists on an existing directory and a trailing slash).
func sqliteDirURL(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", err
	}
	return "file:" + abs + "/", nil
}
