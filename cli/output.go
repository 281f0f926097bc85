package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
)

// output is where a command tells what happens. For people (text), every line goes to stdout, stamped with
// the local time and coloured on a terminal. For programs (json), each event is one JSON object per line on
// stdout, and the progress messages meant for people go to stderr, so stdout stays parseable.
type output struct {
	mu     sync.Mutex
	events io.Writer // events: stdout
	logs   io.Writer // progress messages: stdout for text, stderr for json
	json   bool
	color  bool // colour the text lines
	now    func() time.Time
}

func newOutput(stdout, stderr io.Writer, asJSON bool) *output {
	o := &output{events: stdout, logs: stdout, json: asJSON, now: time.Now}
	if asJSON {
		o.logs = stderr
	} else {
		o.color = colorOn(stdout)
	}
	return o
}

// colorOn tells whether to colour what goes to w: only a terminal, and never when NO_COLOR is set to
// anything (no-color.org).
func colorOn(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// tone is the colour of a piece of text.
type tone string

const (
	plain  tone = ""
	dim    tone = "\x1b[2m"
	green  tone = "\x1b[32m"
	yellow tone = "\x1b[33m"
	red    tone = "\x1b[31m"
	cyan   tone = "\x1b[36m"
	bold   tone = "\x1b[1m"
)

// paint colours s when the output is coloured.
func (o *output) paint(t tone, s string) string {
	if !o.color || t == plain {
		return s
	}
	return string(t) + s + "\x1b[0m"
}

const stampLayout = "2006-01-02 15:04:05"

func (o *output) line(w io.Writer, at time.Time, text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(w, "%s  %s\n", o.paint(dim, at.Local().Format(stampLayout)), text)
}

// logf writes a progress message for people.
func (o *output) logf(t tone, format string, args ...any) {
	o.line(o.logs, o.now(), o.paint(t, fmt.Sprintf(format, args...)))
}

// emit writes an event: ev as a JSON line, or text (already painted) as a stamped line. ev is a struct whose
// first fields are eventHead.
func (o *output) emit(at time.Time, ev any, text string) {
	if !o.json {
		o.line(o.events, at, text)
		return
	}
	data, err := json.Marshal(ev)
	if err != nil {
		data, _ = json.Marshal(errorEvent{eventHead: head("error", at), Message: "cannot encode an event: " + err.Error()})
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events.Write(append(data, '\n'))
}

// record writes the result of a one-shot command: ev as a JSON line, or text as it is.
func (o *output) record(ev any, text string) {
	if !o.json {
		o.mu.Lock()
		defer o.mu.Unlock()
		fmt.Fprint(o.events, text)
		return
	}
	o.emit(time.Time{}, ev, "")
}

// eventHead starts every JSON event.
type eventHead struct {
	Type string `json:"type"`
	// Time is omitted for the results of one-shot commands.
	Time *time.Time `json:"time,omitempty"`
}

func head(kind string, at time.Time) eventHead {
	if at.IsZero() {
		return eventHead{Type: kind}
	}
	at = at.UTC()
	return eventHead{Type: kind, Time: &at}
}

// errorEvent is a problem: fatal ones end the command with exitCode.
type errorEvent struct {
	eventHead
	Message     string `json:"message"`
	RecipientID string `json:"recipientId,omitempty"`
	Fatal       bool   `json:"fatal"`
	ExitCode    int    `json:"exitCode,omitempty"`
}

// fail reports the error a command ends with as a JSON line when the output is JSON; Main writes it to stderr
// either way.
func (o *output) fail(err error) error {
	if err == nil || !o.json {
		return err
	}
	o.emit(o.now(), errorEvent{eventHead: head("error", o.now()), Message: err.Error(), Fatal: true, ExitCode: exitCode(err)}, "")
	return err
}
