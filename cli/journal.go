package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The journal makes a job survive the CLI: before the local call the job is written down (and synced), after
// it the result, and the entry is removed once the server acknowledged the report. A CLI that starts (or
// reconnects) reports what the journal holds before it takes new jobs, and a job that has an entry is never
// run twice: a job without a result was interrupted while the local service was processing it, and is
// reported as a failed attempt instead of being re-run, because the local service may well have acted on it.
//
// Entries live in a directory per server and recipient, locked while a CLI listens, so two CLIs sharing a
// journal directory never report each other's jobs.

// interruptedMessage is the outcome reported for a journaled job without a result.
const interruptedMessage = "interrupted: the CLI stopped while the local service was processing; not re-run"

// jobKey names one attempt of one delivery.
type jobKey struct {
	DeliveryID string
	Attempt    int
}

func (k jobKey) String() string {
	return fmt.Sprintf("delivery %s attempt %d", k.DeliveryID, k.Attempt)
}

// outcome is what a local call came to, as reported to the server.
type outcome struct {
	StartedAt    time.Time `json:"startedAt"`
	FinishedAt   time.Time `json:"finishedAt"`
	HTTPStatus   int       `json:"httpStatus,omitempty"`
	ErrorKind    string    `json:"errorKind,omitempty"`
	ErrorMessage string    `json:"errorMessage,omitempty"`
	// RetryAfterSeconds is the wait a 429 or 503 asked for with Retry-After (webhook.RetryAfterSeconds).
	RetryAfterSeconds int `json:"retryAfterSeconds,omitempty"`
}

// entry is one journaled job.
type entry struct {
	Server      string    `json:"server"`
	RecipientID string    `json:"recipientId"`
	DeliveryID  string    `json:"deliveryId"`
	Attempt     int       `json:"attempt"`
	RequestID   string    `json:"requestId,omitempty"`
	LeaseToken  string    `json:"leaseToken"`
	Method      string    `json:"method"`
	Path        string    `json:"path"`
	ReceivedAt  time.Time `json:"receivedAt"`
	// Result is nil until the local call finished.
	Result *outcome `json:"result,omitempty"`
}

func (e *entry) key() jobKey { return jobKey{DeliveryID: e.DeliveryID, Attempt: e.Attempt} }

// journal is the directory of one (server, recipient).
type journal struct {
	dir    string
	unlock func()
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// scopeDir names the journal directory of a server and recipient: readable, and unique through a hash of
// the full server URL.
func scopeDir(root, server, recipientID string) string {
	host := server
	if u, err := url.Parse(server); err == nil && u.Host != "" {
		host = u.Host
	}
	sum := sha256.Sum256([]byte(strings.TrimRight(server, "/")))
	name := fmt.Sprintf("%s-%s-recipient-%s", unsafeChars.ReplaceAllString(host, "_"), hex.EncodeToString(sum[:4]),
		unsafeChars.ReplaceAllString(recipientID, "_"))
	return filepath.Join(root, name)
}

// openJournal opens (creating it) the journal of server and recipientID under root and locks it.
func openJournal(root, server, recipientID string) (*journal, error) {
	dir := scopeDir(root, server, recipientID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	return &journal{dir: dir, unlock: unlock}, nil
}

// Close releases the lock.
func (j *journal) Close() { j.unlock() }

func (j *journal) path(k jobKey) string {
	return filepath.Join(j.dir, fmt.Sprintf("delivery-%s-attempt-%d.json", unsafeChars.ReplaceAllString(k.DeliveryID, "_"), k.Attempt))
}

// get returns the entry of k, or nil.
func (j *journal) get(k jobKey) (*entry, error) {
	data, err := os.ReadFile(j.path(k))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	var e entry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("journal entry %s: %w", j.path(k), err)
	}
	return &e, nil
}

// put writes e durably: a reader (this CLI after a crash) sees the old entry or the new one, never a torn one.
func (j *journal) put(e *entry) error {
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	final := j.path(e.key())
	tmp, err := os.CreateTemp(j.dir, ".entry-*")
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("journal: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("journal: sync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return syncDir(j.dir)
}

// remove forgets k once the server has its outcome.
func (j *journal) remove(k jobKey) error {
	if err := os.Remove(j.path(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// list returns every entry, oldest first.
func (j *journal) list() ([]*entry, error) {
	names, err := filepath.Glob(filepath.Join(j.dir, "delivery-*.json"))
	if err != nil {
		return nil, err
	}
	var out []*entry
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("journal: %w", err)
		}
		var e entry
		if err := json.Unmarshal(data, &e); err != nil {
			return nil, fmt.Errorf("journal entry %s: %w", name, err)
		}
		out = append(out, &e)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ReceivedAt.Before(out[b].ReceivedAt) })
	return out, nil
}

// syncDir makes a rename in dir durable. Some platforms cannot sync a directory; there the rename is as
// durable as the platform makes it.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer d.Close()
	_ = d.Sync()
	return nil
}
