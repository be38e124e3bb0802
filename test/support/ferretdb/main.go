// Command ferretdb-arbiter runs FerretDB (MongoDB wire protocol on SQLite, or on PostgreSQL
// with -postgresql-url) for Arbiter's store tests and benchmarks. It embeds the library package
// because the upstream cmd/ferretdb binary built with `go install` panics on a missing version file.
// Clients reach FerretDB through the proxy below, which applies the write commands FerretDB runs
// as a read followed by a separate write one at a time, so that conditional updates are atomic,
// as on MongoDB (see serialisedByDefault).
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:27017", "TCP address to listen on (the proxy; FerretDB itself listens on a Unix socket in -dir)")
	dir := flag.String("dir", "", "directory for the SQLite database files and FerretDB's socket (created if missing)")
	postgresqlURL := flag.String("postgresql-url", "", "PostgreSQL connection string: the postgresql backend instead of SQLite")
	serialise := flag.String("serialise", "", "comma-separated write commands the proxy applies one at a time, or none (default: the backend's, see serialisedByDefault)")
	flag.Parse()

	handler := "sqlite"
	if *postgresqlURL != "" {
		handler = "postgresql"
	}
	commands := serialisedByDefault[handler]
	if *serialise != "" {
		commands = parseCommands(*serialise)
	}
	if err := run(*listen, *dir, handler, *postgresqlURL, commands); err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb-arbiter:", err)
		os.Exit(1)
	}
}

func run(listen, dir, handler, postgresqlURL string, serialised map[string]bool) error {
	if dir == "" {
		return fmt.Errorf("-dir is required")
	}
	sqliteURL, err := sqliteDirURL(dir)
	if err != nil {
		return err
	}
	writeCommands = serialised

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
	proxyDone := make(chan error, 1)
	go func() {
		proxyDone <- serveProxy(listener, func() (net.Conn, error) { return net.Dial("unix", socket) }, logger)
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

// The proxy: a wire-protocol proxy in front of FerretDB that applies some write commands one at a time.
//
// Why: FerretDB 1.x runs findAndModify, update and delete as a read (its backend's Query)
// followed by a separate write by _id (UpdateAll / DeleteAll: on PostgreSQL an
// `UPDATE … WHERE _id = $2` in a transaction of its own that does not check the filter again),
// on both of its backends. So two concurrent conditional updates (a single-use code redeemed
// twice, an $inc on one counter) can both succeed, and a delete by filter can remove a document
// another write has just changed to no longer match. Real MongoDB applies each of them
// atomically per document. Holding one process-wide lock from forwarding such a command until
// its reply has come back means no other of them can land between FerretDB's read and its
// write, which is exactly what makes filter + write atomic. Reads, and the commands left out of
// the set, are not locked and pass concurrently.
//
// Transactions need nothing extra: FerretDB 1.x does not support them, and each write
// inside one would be locked on its own anyway.

const (
	headerSize = 16
	// MongoDB's maxMessageSizeBytes; anything larger (or smaller than a header) is not a message.
	maxMessageSize = 48_000_000

	opMsg = 2013

	flagChecksumPresent = 1 << 0
	flagMoreToCome      = 1 << 1
	flagExhaustAllowed  = 1 << 16
)

// serialisedByDefault are the commands each backend has serialised (lower-case: MongoDB also accepts
// "findandmodify"). On PostgreSQL an insert is one INSERT that the unique indexes check atomically,
// so inserts (most of Arbiter's writes: tokens, audit entries) pass concurrently; the three
// read-then-write commands do not (test/store/ferretdb-atomicity.test.ts shows why they must not).
// The SQLite backend keeps every write serialised.
var serialisedByDefault = map[string]map[string]bool{
	"sqlite":     {"findandmodify": true, "update": true, "delete": true, "insert": true},
	"postgresql": {"findandmodify": true, "update": true, "delete": true},
}

// writeCommands are the commands serialised by the lock, set once at start.
var writeCommands map[string]bool

// parseCommands reads -serialise: command names in any case, or "none".
func parseCommands(list string) map[string]bool {
	commands := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		if name != "" && name != "none" {
			commands[name] = true
		}
	}
	return commands
}

// writeLock is held from forwarding a write command until FerretDB's reply to it is read.
var writeLock sync.Mutex

// serveProxy accepts client connections on listener and pipes each to a new connection made by dialUpstream.
func serveProxy(listener net.Listener, dialUpstream func() (net.Conn, error), logger *slog.Logger) error {
	for {
		client, err := listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go func() {
			if err := pipe(client, dialUpstream); err != nil {
				logger.Error("proxy connection failed", "error", err)
			}
		}()
	}
}

// proxiedConn is one client connection and its FerretDB connection, with the write it holds the lock for.
type proxiedConn struct {
	client, upstream net.Conn

	mu      sync.Mutex
	holding bool  // this connection holds writeLock
	waitFor int32 // the requestID of the write whose reply releases it
}

func pipe(client net.Conn, dialUpstream func() (net.Conn, error)) error {
	defer client.Close()
	upstream, err := dialUpstream()
	if err != nil {
		return err
	}
	defer upstream.Close()

	c := &proxiedConn{client: client, upstream: upstream}
	// A lock held when either side goes away would stop every other write forever.
	defer c.release()

	replies := make(chan error, 1)
	go func() {
		replies <- c.forwardReplies()
		client.Close() // ends forwardRequests too
	}()
	requestErr := c.forwardRequests()
	upstream.Close() // ends forwardReplies
	replyErr := <-replies
	return errors.Join(quiet(requestErr), quiet(replyErr))
}

// forwardRequests sends the client's messages to FerretDB, taking writeLock before a write command.
func (c *proxiedConn) forwardRequests() error {
	for {
		msg, err := readMessage(c.client)
		if err != nil {
			return err
		}
		if isAcknowledgedWrite(msg) {
			writeLock.Lock()
			c.mu.Lock()
			c.holding, c.waitFor = true, int32(binary.LittleEndian.Uint32(msg[4:8]))
			c.mu.Unlock()
		}
		if _, err := c.upstream.Write(msg); err != nil {
			return err
		}
	}
}

// forwardReplies sends FerretDB's messages to the client, releasing writeLock at the reply to the write holding it.
func (c *proxiedConn) forwardReplies() error {
	for {
		msg, err := readMessage(c.upstream)
		if err != nil {
			return err
		}
		c.releaseAt(int32(binary.LittleEndian.Uint32(msg[8:12])))
		if _, err := c.client.Write(msg); err != nil {
			return err
		}
	}
}

func (c *proxiedConn) releaseAt(responseTo int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holding && c.waitFor == responseTo {
		c.holding = false
		writeLock.Unlock()
	}
}

func (c *proxiedConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holding {
		c.holding = false
		writeLock.Unlock()
	}
}

// readMessage reads one whole message: the 16-byte header (messageLength, requestID,
// responseTo, opCode; little-endian int32s) and the rest of its messageLength bytes.
func readMessage(r io.Reader) ([]byte, error) {
	var header [headerSize]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		return nil, err
	}
	length := int32(binary.LittleEndian.Uint32(header[0:4]))
	if length < headerSize || length > maxMessageSize {
		return nil, fmt.Errorf("message length %d out of range", length)
	}
	msg := make([]byte, length)
	copy(msg, header[:])
	if _, err := io.ReadFull(r, msg[headerSize:]); err != nil {
		return nil, err
	}
	return msg, nil
}

// isAcknowledgedWrite tells an OP_MSG running a write command that expects one reply.
// Anything else passes without the lock: reads, legacy or compressed opcodes, and
// requests with moreToCome (no reply would release the lock) or exhaustAllowed (more than one might).
func isAcknowledgedWrite(msg []byte) bool {
	if len(msg) < headerSize+4 || binary.LittleEndian.Uint32(msg[12:16]) != opMsg {
		return false
	}
	flags := binary.LittleEndian.Uint32(msg[16:20])
	if flags&(flagMoreToCome|flagExhaustAllowed) != 0 {
		return false
	}
	sections := msg[20:]
	if flags&flagChecksumPresent != 0 && len(sections) >= 4 {
		sections = sections[:len(sections)-4]
	}
	return writeCommands[strings.ToLower(commandName(sections))]
}

// commandName is the first key of the body (kind 0) section, the command; "" when there is none.
func commandName(sections []byte) string {
	for len(sections) > 0 {
		kind := sections[0]
		sections = sections[1:]
		if len(sections) < 4 {
			return ""
		}
		size := int(binary.LittleEndian.Uint32(sections[0:4]))
		if size < 5 || size > len(sections) {
			return ""
		}
		if kind == 0 {
			return firstKey(sections[:size])
		}
		// Kind 1 (a document sequence): its size covers itself, the identifier and the documents.
		sections = sections[size:]
	}
	return ""
}

// firstKey reads a BSON document's first element name: int32 size, type byte, C string.
func firstKey(doc []byte) string {
	if len(doc) < 6 || doc[4] == 0 {
		return ""
	}
	name := doc[5:]
	end := strings.IndexByte(string(name), 0)
	if end < 0 {
		return ""
	}
	return string(name[:end])
}

// quiet drops the errors of a connection closing, which is how every connection ends.
func quiet(err error) error {
	for _, closing := range []error{io.EOF, io.ErrUnexpectedEOF, net.ErrClosed, syscall.ECONNRESET, syscall.EPIPE} {
		if errors.Is(err, closing) {
			return nil
		}
	}
	return err
}
