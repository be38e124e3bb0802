// Command ferretdb-arbiter runs FerretDB (MongoDB wire protocol on SQLite) for
// Arbiter's store tests. It embeds the library package because the upstream
// cmd/ferretdb binary built with `go install` panics on a missing version file.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:27017", "TCP address to listen on")
	dir := flag.String("dir", "", "directory for the SQLite database files (created if missing)")
	flag.Parse()

	if err := run(*listen, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb-arbiter:", err)
		os.Exit(1)
	}
}

func run(listen, dir string) error {
	if dir == "" {
		return fmt.Errorf("-dir is required")
	}
	sqliteURL, err := sqliteDirURL(dir)
	if err != nil {
		return err
	}

	// Errors only: at warning level FerretDB logs every error reply it sends.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

	// The embeddable package disables telemetry itself (state.DisableTelemetry).
	server, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: listen},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: sqliteURL,
	})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return server.Run(ctx)
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
