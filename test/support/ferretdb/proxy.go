package main

// The proxy: a wire-protocol proxy in front of FerretDB that serialises some write commands.
//
// Why: FerretDB 1.x runs findAndModify, update and delete as a read (its backend's Query)
// followed by a separate write by _id (UpdateAll / DeleteAll: on PostgreSQL an
// `UPDATE … WHERE _id = $2` in a transaction of its own that does not check the filter again),
// on both of its backends. So two concurrent conditional updates (a single-use code redeemed
// twice, an $inc on one counter) can both succeed, and a delete by filter can remove a document
// another write has just changed to no longer match. Real MongoDB applies each of them
// atomically per document. Holding a lock from forwarding such a command until its reply has
// come back means no other of them can land between FerretDB's read and its write, which is
// exactly what makes filter + write atomic. Reads, and the commands left out of the set, are
// not locked and pass concurrently (test/store/ferretdb-atomicity.test.ts shows which must not).
//
// Which lock (serialisation.perDocument):
//   - global: every serialised command waits for every other one (the SQLite backend).
//   - document: a command whose filter names one _id (findAndModify, or an update or delete of one
//     statement) can only race with commands on that document, so it waits only for those, and
//     shares its collection; any other (a deleteMany by field, an update of several documents)
//     holds its collection exclusively, and other collections go on (the PostgreSQL backend, where
//     writes to different documents run in parallel in PostgreSQL itself). A command whose
//     collection cannot be read holds everything.
//
// Transactions need nothing extra: FerretDB 1.x does not support them, and each write
// inside one would be locked on its own anyway.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/bson/bsontype"
	"go.mongodb.org/mongo-driver/x/bsonx/bsoncore"
)

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
// read-then-write commands do not. The SQLite backend keeps every write serialised.
var serialisedByDefault = map[string]map[string]bool{
	"sqlite":     {"findandmodify": true, "update": true, "delete": true, "insert": true},
	"postgresql": {"findandmodify": true, "update": true, "delete": true},
}

// lockByDefault is each backend's lock (see the top of this file).
var lockByDefault = map[string]string{"sqlite": "global", "postgresql": "document"}

// serialisation says which commands the proxy serialises, and how.
type serialisation struct {
	commands    map[string]bool
	perDocument bool
}

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

type proxy struct {
	policy       serialisation
	locks        *lockSet
	stats        *proxyStats
	dialUpstream func() (net.Conn, error)
	logger       *slog.Logger
}

func newProxy(policy serialisation, dialUpstream func() (net.Conn, error), logger *slog.Logger) *proxy {
	return &proxy{
		policy:       policy,
		locks:        &lockSet{collections: map[string]*collectionLocks{}},
		stats:        &proxyStats{commands: map[string]*atomic.Int64{}},
		dialUpstream: dialUpstream,
		logger:       logger,
	}
}

// serve accepts client connections on listener and pipes each to a new upstream connection.
func (p *proxy) serve(listener net.Listener) error {
	for {
		client, err := listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go func() {
			if err := p.pipe(client); err != nil {
				p.logger.Error("proxy connection failed", "error", err)
			}
		}()
	}
}

// proxiedConn is one client connection and its FerretDB connection, with the lock its write holds.
type proxiedConn struct {
	client, upstream net.Conn

	mu      sync.Mutex
	release func() // unlocks what the write in flight holds; nil when it holds nothing
	waitFor int32  // the requestID of the write whose reply releases it
}

func (p *proxy) pipe(client net.Conn) error {
	defer client.Close()
	upstream, err := p.dialUpstream()
	if err != nil {
		return err
	}
	defer upstream.Close()

	c := &proxiedConn{client: client, upstream: upstream}
	// A lock held when either side goes away would stop every other write forever.
	defer c.releaseAny()

	replies := make(chan error, 1)
	go func() {
		replies <- c.forwardReplies()
		client.Close() // ends forwardRequests too
	}()
	requestErr := p.forwardRequests(c)
	upstream.Close() // ends forwardReplies
	replyErr := <-replies
	return errors.Join(quiet(requestErr), quiet(replyErr))
}

// forwardRequests sends the client's messages to FerretDB, locking before a serialised write command.
func (p *proxy) forwardRequests(c *proxiedConn) error {
	for {
		msg, err := readMessage(c.client)
		if err != nil {
			return err
		}
		if command, target, ok := p.serialised(msg); ok {
			started := time.Now()
			release := p.locks.acquire(target)
			p.stats.count(command, target.document == "", time.Since(started))
			c.mu.Lock()
			c.release, c.waitFor = release, int32(binary.LittleEndian.Uint32(msg[4:8]))
			c.mu.Unlock()
		}
		if _, err := c.upstream.Write(msg); err != nil {
			return err
		}
	}
}

// forwardReplies sends FerretDB's messages to the client, releasing the lock at the reply to the write holding it.
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
	if c.release != nil && c.waitFor == responseTo {
		c.release()
		c.release = nil
	}
}

func (c *proxiedConn) releaseAny() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.release != nil {
		c.release()
		c.release = nil
	}
}

// serialised tells an OP_MSG running a serialised write command that expects one reply, with the
// command's name and what it writes (lockTarget). Anything else passes without a lock:
// reads, legacy or compressed opcodes, and requests with moreToCome (no reply would release the
// lock) or exhaustAllowed (more than one might).
func (p *proxy) serialised(msg []byte) (command string, target lockTarget, ok bool) {
	if len(msg) < headerSize+4 || binary.LittleEndian.Uint32(msg[12:16]) != opMsg {
		return "", target, false
	}
	flags := binary.LittleEndian.Uint32(msg[16:20])
	if flags&(flagMoreToCome|flagExhaustAllowed) != 0 {
		return "", target, false
	}
	sections := msg[20:]
	if flags&flagChecksumPresent != 0 && len(sections) >= 4 {
		sections = sections[:len(sections)-4]
	}
	body, sequences := splitSections(sections)
	if body == nil {
		return "", target, false
	}
	first, err := body.IndexErr(0)
	if err != nil {
		return "", target, false
	}
	command = strings.ToLower(first.Key())
	if !p.policy.commands[command] {
		return "", target, false
	}
	if !p.policy.perDocument {
		return command, target, true
	}
	return command, targetOf(command, body, sequences), true
}

// lockTarget is what a serialised command writes: one document of a collection, a whole collection
// (document ""), or, when not even the collection can be read, everything (both "").
type lockTarget struct {
	collection, document string
}

// splitSections reads an OP_MSG's sections: the body (kind 0) and the document sequences (kind 1) by identifier.
func splitSections(sections []byte) (bsoncore.Document, map[string][]bsoncore.Document) {
	var body bsoncore.Document
	sequences := map[string][]bsoncore.Document{}
	for len(sections) > 0 {
		kind := sections[0]
		sections = sections[1:]
		if len(sections) < 4 {
			return nil, nil
		}
		size := int(binary.LittleEndian.Uint32(sections[0:4]))
		if size < 5 || size > len(sections) {
			return nil, nil
		}
		switch kind {
		case 0:
			body = bsoncore.Document(sections[:size])
		case 1:
			// A document sequence: its size covers itself, the identifier (a C string) and the documents.
			rest := sections[4:size]
			end := strings.IndexByte(string(rest), 0)
			if end < 0 {
				return nil, nil
			}
			identifier, docs := string(rest[:end]), rest[end+1:]
			for len(docs) >= 5 {
				length := int(binary.LittleEndian.Uint32(docs[0:4]))
				if length < 5 || length > len(docs) {
					return nil, nil
				}
				sequences[identifier] = append(sequences[identifier], bsoncore.Document(docs[:length]))
				docs = docs[length:]
			}
		default:
			return nil, nil
		}
		sections = sections[size:]
	}
	return body, sequences
}

// targetOf is the collection a command writes, as "<db>.<collection>", and the one document in it
// (its _id as BSON) when its filter names exactly one _id by value.
func targetOf(command string, body bsoncore.Document, sequences map[string][]bsoncore.Document) lockTarget {
	collection, ok := body.Lookup(command).StringValueOK()
	if !ok {
		if collection, ok = body.Lookup("findAndModify").StringValueOK(); !ok {
			return lockTarget{}
		}
	}
	database, _ := body.Lookup("$db").StringValueOK()
	target := lockTarget{collection: database + "." + collection}
	var filter bsoncore.Document
	switch command {
	case "findandmodify":
		filter, ok = body.Lookup("query").DocumentOK()
	case "update", "delete":
		filter, ok = onlyStatementFilter(body, sequences, command+"s")
	default:
		return target
	}
	if !ok {
		return target
	}
	id, err := filter.LookupErr("_id")
	if err != nil || id.Type == bsontype.EmbeddedDocument || id.Type == bsontype.Array || id.Type == bsontype.Regex {
		return target // no _id, or an operator ($in, $gt…), an array or a pattern: maybe several documents
	}
	target.document = fmt.Sprintf("%x%x", byte(id.Type), id.Data)
	return target
}

// onlyStatementFilter is the `q` of an update or delete command with exactly one statement (in the
// body's array or in a document sequence of that name).
func onlyStatementFilter(body bsoncore.Document, sequences map[string][]bsoncore.Document, field string) (bsoncore.Document, bool) {
	statements := sequences[field]
	if array, ok := body.Lookup(field).ArrayOK(); ok {
		values, err := array.Values()
		if err != nil {
			return nil, false
		}
		for _, value := range values {
			doc, ok := value.DocumentOK()
			if !ok {
				return nil, false
			}
			statements = append(statements, doc)
		}
	}
	if len(statements) != 1 {
		return nil, false
	}
	if multi, ok := statements[0].Lookup("multi").BooleanOK(); ok && multi {
		return nil, false
	}
	return statements[0].Lookup("q").DocumentOK()
}

// lockSet: a command on one document holds that document's lock and shares its collection's `all`;
// one on a whole collection holds that `all` alone; one on everything holds the set's `all` alone
// (every other command shares it).
type lockSet struct {
	all         sync.RWMutex
	mu          sync.Mutex
	collections map[string]*collectionLocks
}

type collectionLocks struct {
	all       sync.RWMutex
	documents map[string]*documentLock
	users     int // holders and waiters: the entry goes when none is left
}

type documentLock struct {
	sync.Mutex
	users int
}

// acquire takes the locks for target and returns what releases them.
func (l *lockSet) acquire(target lockTarget) func() {
	if target.collection == "" {
		l.all.Lock()
		return l.all.Unlock
	}
	l.all.RLock()
	collection, document := l.enter(target)
	if document == nil {
		collection.all.Lock()
	} else {
		collection.all.RLock()
		document.Lock()
	}
	return func() {
		if document == nil {
			collection.all.Unlock()
		} else {
			document.Unlock()
			collection.all.RUnlock()
		}
		l.leave(target, collection, document)
		l.all.RUnlock()
	}
}

// enter finds (or makes) the entries of target, counting this command among their users.
func (l *lockSet) enter(target lockTarget) (*collectionLocks, *documentLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	collection := l.collections[target.collection]
	if collection == nil {
		collection = &collectionLocks{documents: map[string]*documentLock{}}
		l.collections[target.collection] = collection
	}
	collection.users++
	if target.document == "" {
		return collection, nil
	}
	document := collection.documents[target.document]
	if document == nil {
		document = &documentLock{}
		collection.documents[target.document] = document
	}
	document.users++
	return collection, document
}

// leave drops the entries no command uses any more.
func (l *lockSet) leave(target lockTarget, collection *collectionLocks, document *documentLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if document != nil {
		if document.users--; document.users == 0 {
			delete(collection.documents, target.document)
		}
	}
	if collection.users--; collection.users == 0 {
		delete(l.collections, target.collection)
	}
}

// proxyStats counts the serialised commands, those that locked a whole collection (or everything),
// and the time they waited for their locks, for bench:scale.
type proxyStats struct {
	mu        sync.Mutex
	commands  map[string]*atomic.Int64
	exclusive atomic.Int64
	waitedNs  atomic.Int64
}

func (s *proxyStats) count(command string, exclusive bool, waited time.Duration) {
	s.mu.Lock()
	counter := s.commands[command]
	if counter == nil {
		counter = &atomic.Int64{}
		s.commands[command] = counter
	}
	s.mu.Unlock()
	counter.Add(1)
	if exclusive {
		s.exclusive.Add(1)
	}
	s.waitedNs.Add(waited.Nanoseconds())
}

// writeEverySecond keeps `file` up to date with the totals so far (written to a temporary name and renamed).
func (s *proxyStats) writeEverySecond(ctx context.Context, file string) {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		s.mu.Lock()
		commands := map[string]int64{}
		for name, counter := range s.commands {
			commands[name] = counter.Load()
		}
		s.mu.Unlock()
		data, _ := json.Marshal(map[string]any{
			"serialised":    commands,
			"exclusive":     s.exclusive.Load(),
			"waitedSeconds": float64(s.waitedNs.Load()) / 1e9,
		})
		if os.WriteFile(file+".tmp", data, 0o600) == nil {
			_ = os.Rename(file+".tmp", file)
		}
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

// quiet drops the errors of a connection closing, which is how every connection ends.
func quiet(err error) error {
	for _, closing := range []error{io.EOF, io.ErrUnexpectedEOF, net.ErrClosed, syscall.ECONNRESET, syscall.EPIPE} {
		if errors.Is(err, closing) {
			return nil
		}
	}
	return err
}
