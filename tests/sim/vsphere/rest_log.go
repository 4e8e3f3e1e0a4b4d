package main

// The REST request log: with -rest-log FILE (or VSPHERESIM_REST_LOG=FILE in the environment)
// every /api and /rest request of a client is appended to FILE as one JSON object per line,
// with the answer the simulator gave, so that a test can check both against the vendor's
// published contract (tests/lib/rest_contract.py). Requests of the simulator's own internal
// clients and the admin endpoints are not logged; answers a proxy rule gives
// (/_sim/rest_faults) are not vCenter's and are not logged either. Request headers
// (credentials, session ids) are never written.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

const restLogEnv = "VSPHERESIM_REST_LOG"

// restLogEntry is one line of the log.
type restLogEntry struct {
	Seq    int    `json:"seq"`
	Time   string `json:"time"`
	Method string `json:"method"`
	Path   string `json:"path"`
	// Query is the raw query string ("" when none).
	Query string `json:"query"`
	// RequestBody is the request body when it is JSON (absent when empty);
	// RequestText holds a body that is not JSON.
	RequestBody json.RawMessage `json:"request_body,omitempty"`
	RequestText string          `json:"request_text,omitempty"`
	Status      int             `json:"status"`
	ContentType string          `json:"content_type,omitempty"`
	// ResponseBody / ResponseText: the same for the answer.
	ResponseBody json.RawMessage `json:"response_body,omitempty"`
	ResponseText string          `json:"response_text,omitempty"`
}

type restLogger struct {
	mu  sync.Mutex
	f   *os.File
	seq int
}

// restLog is nil unless a log file was named.
var restLog *restLogger

func openRestLog(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("rest log: %w", err)
	}
	restLog = &restLogger{f: f}
	return nil
}

// bodyFields splits a body into its JSON form or its text form.
func bodyFields(b []byte) (json.RawMessage, string) {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 {
		return nil, ""
	}
	if json.Valid(trimmed) {
		return json.RawMessage(append([]byte(nil), trimmed...)), ""
	}
	return nil, string(b)
}

func (l *restLogger) write(e *restLogEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	e.Seq = l.seq
	line, err := json.Marshal(e)
	if err != nil {
		return
	}
	_, _ = l.f.Write(append(line, '\n'))
}

// restLogWriter passes the answer through and keeps a copy of it.
type restLogWriter struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
}

func (w *restLogWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *restLogWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *restLogWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *restLogWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := w.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, fmt.Errorf("hijack not supported")
}

// startRestLog reads the request body (putting it back for the handlers) and returns the
// writer to serve the request with and a function that writes the entry once it is answered.
func startRestLog(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, func()) {
	if restLog == nil {
		return w, func() {}
	}
	var reqBody []byte
	if r.Body != nil {
		reqBody, _ = io.ReadAll(r.Body)
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	rec := &restLogWriter{ResponseWriter: w}
	started := time.Now().UTC()
	return rec, func() {
		e := &restLogEntry{
			Time: started.Format("2006-01-02T15:04:05.000Z"), Method: r.Method, Path: r.URL.Path,
			Query: r.URL.RawQuery, Status: rec.code, ContentType: rec.Header().Get("Content-Type"),
		}
		if e.Status == 0 {
			e.Status = http.StatusOK
		}
		e.RequestBody, e.RequestText = bodyFields(reqBody)
		e.ResponseBody, e.ResponseText = bodyFields(rec.body.Bytes())
		restLog.write(e)
	}
}
