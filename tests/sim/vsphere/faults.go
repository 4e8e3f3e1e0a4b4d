package main

// Faults of the vCenter endpoint itself, for fault tests: every session
// killed, an outage window (the listener closed, then opened again on the
// same port), and answers a proxy or load balancer in front of vCenter
// produces for REST paths and SOAP methods (an HTTP status, a delay, a reset
// connection). Host and VM task faults are in hooks.go.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// wireRule is one injected proxy answer, for REST (Path) or SOAP (Method).
type wireRule struct {
	ID     int    `json:"id"`
	Method string `json:"method"`
	Path   string `json:"path,omitempty"`
	Status int    `json:"status,omitempty"`
	Reset  bool   `json:"reset,omitempty"`
	// Forward: the request goes on to vCenter first (and is carried out);
	// its answer is then replaced by Status or Reset, as by a gateway that
	// times out or fails after it has forwarded the request.
	Forward bool    `json:"forward,omitempty"`
	Delay   float64 `json:"delay_seconds,omitempty"`
	Times   int     `json:"times"`
	Body    string  `json:"body,omitempty"`
	Hits    int     `json:"hits"`

	re *regexp.Regexp
}

type wireState struct {
	mu     sync.Mutex
	rest   []*wireRule
	soap   []*wireRule
	nextID int

	// REST session id -> the key of the SOAP session it is bound to. vCenter's
	// vAPI endpoint logs in to vpxd for each REST session, so a REST session
	// ends with its SOAP session (SessionManager.TerminateSession, a logout,
	// /_sim/sessions/kill); the vAPI simulator's own store knows nothing of it.
	restBound map[string]string

	outage bool
}

var wire = &wireState{restBound: map[string]string{}}

const (
	soapCookie = "vmware_soap_session"
	restHeader = "vmware-api-session-id"
)

// addRule validates and stores a rule; soap selects the SOAP list.
func (s *wireState) addRule(rule *wireRule, soap bool) error {
	if rule.Method == "" {
		rule.Method = "*"
	}
	if !soap {
		rule.Method = strings.ToUpper(rule.Method)
		if rule.Path == "" {
			return fmt.Errorf("path (a regular expression) is required")
		}
		re, err := regexp.Compile(rule.Path)
		if err != nil {
			return fmt.Errorf("path: %v", err)
		}
		rule.re = re
	}
	if rule.Status != 0 && (rule.Status < 400 || rule.Status > 599) {
		return fmt.Errorf("status must be 400-599")
	}
	if rule.Status != 0 && rule.Reset {
		return fmt.Errorf("status and reset exclude each other")
	}
	if rule.Delay < 0 || rule.Times < 0 {
		return fmt.Errorf("delay_seconds and times must not be negative")
	}
	if rule.Status == 0 && !rule.Reset && rule.Delay == 0 {
		return fmt.Errorf("a rule needs status, reset or delay_seconds")
	}
	if rule.Forward && rule.Status == 0 && !rule.Reset {
		return fmt.Errorf("forward needs status or reset (the answer that replaces vCenter's)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	rule.ID = s.nextID
	if soap {
		s.soap = append(s.soap, rule)
	} else {
		s.rest = append(s.rest, rule)
	}
	return nil
}

func (s *wireState) rules(soap bool) []wireRule {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.rest
	if soap {
		list = s.soap
	}
	out := make([]wireRule, 0, len(list))
	for _, r := range list {
		out = append(out, *r)
	}
	return out
}

func (s *wireState) clearRules(soap bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if soap {
		n := len(s.soap)
		s.soap = nil
		return n
	}
	n := len(s.rest)
	s.rest = nil
	return n
}

// match consumes one use of the first rule matching a request: method is
// the HTTP method (REST) or the SOAP method name, target the path and query.
func (s *wireState) match(soap bool, method, target string) *wireRule {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := &s.rest
	if soap {
		list = &s.soap
	}
	for i, r := range *list {
		if r.Method != "*" && r.Method != method {
			continue
		}
		if !soap && !r.re.MatchString(target) {
			continue
		}
		r.Hits++
		if r.Times > 0 && r.Hits >= r.Times {
			*list = append((*list)[:i:i], (*list)[i+1:]...)
		}
		c := *r
		return &c
	}
	return nil
}

// applyRule answers a request as the rule says; false means serve it normally
// (a rule with only a delay, or a forward rule: see forwardRule).
func applyRule(w http.ResponseWriter, r *http.Request, rule *wireRule) bool {
	if rule.Delay > 0 {
		t := time.NewTimer(time.Duration(rule.Delay * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return true
		}
	}
	if rule.Forward {
		return false
	}
	return proxyAnswer(w, rule)
}

// proxyAnswer writes the rule's own answer: a reset or its status.
func proxyAnswer(w http.ResponseWriter, rule *wireRule) bool {
	switch {
	case rule.Reset:
		resetConnection(w)
		return true
	case rule.Status != 0:
		body := rule.Body
		if body == "" {
			body = fmt.Sprintf("%d %s\n", rule.Status, http.StatusText(rule.Status))
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Connection", "close")
		w.WriteHeader(rule.Status)
		_, _ = w.Write([]byte(body))
		return true
	}
	return false
}

// forwardRule lets a forward rule's request go on to vCenter, which carries it
// out, while vCenter's answer is held back; the returned func, deferred by the
// caller, then answers the rule's status or resets the connection. For any
// other rule (or none) it returns w and a func that does nothing.
func forwardRule(w http.ResponseWriter, rule *wireRule) (http.ResponseWriter, func()) {
	if rule == nil || !rule.Forward {
		return w, func() {}
	}
	held := &heldAnswer{header: http.Header{}}
	return held, func() { proxyAnswer(w, rule) }
}

// heldAnswer takes vCenter's answer and drops it.
type heldAnswer struct {
	header http.Header
	code   int
}

func (h *heldAnswer) Header() http.Header { return h.header }
func (h *heldAnswer) Write(b []byte) (int, error) {
	if h.code == 0 {
		h.code = http.StatusOK
	}
	return len(b), nil
}
func (h *heldAnswer) WriteHeader(code int) { h.code = code }

// resetConnection drops the client's TCP connection without an answer (RST).
func resetConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	raw := conn
	if tc, ok := conn.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = raw.Close()
}

// ---- sessions ---------------------------------------------------------------------------

// soapSessionKeys lists vcsim's SOAP sessions, except those of the
// simulator's own internal clients.
func soapSessionKeys(reg *simulator.Registry) []string {
	sm := reg.SessionManager()
	view, ok := (&simulator.Session{Registry: simulator.NewRegistry(), Map: reg}).Get(sm.Reference()).(*simulator.SessionManager)
	if !ok {
		return nil
	}
	var keys []string
	for _, s := range view.SessionList {
		if strings.HasPrefix(s.UserAgent, "govmomi") || strings.HasPrefix(s.UserAgent, "govc") {
			continue
		}
		keys = append(keys, s.Key)
	}
	return keys
}

// soapSessionLive tells whether vcsim's session store holds the session key.
func soapSessionLive(reg *simulator.Registry, key string) bool {
	sm := reg.SessionManager()
	view, ok := (&simulator.Session{Registry: simulator.NewRegistry(), Map: reg}).Get(sm.Reference()).(*simulator.SessionManager)
	if !ok {
		return false
	}
	for _, s := range view.SessionList {
		if s.Key == key {
			return true
		}
	}
	return false
}

// killSessions ends every client SOAP session through SessionManager.TerminateSession,
// the call an administrator (or vCenter's idle-session policy) makes; the REST sessions
// bound to them end with them. Returns (SOAP sessions ended, REST sessions ended).
func (f *front) killSessions() (int, int) {
	sm := f.reg.SessionManager()
	ctx := &simulator.Context{Context: context.Background(), Map: f.reg,
		Session: &simulator.Session{UserSession: types.UserSession{Key: "gpupool-sim-admin"}}}
	soapKeys := soapSessionKeys(f.reg)
	ended := map[string]bool{}
	for _, key := range soapKeys {
		sm.TerminateSession(ctx, &types.TerminateSession{SessionId: []string{key}})
		ended[key] = true
	}
	restN := 0
	wire.mu.Lock()
	for _, key := range wire.restBound {
		if ended[key] {
			restN++
		}
	}
	wire.mu.Unlock()
	return len(soapKeys), restN
}

// bindRESTSession logs in to vcsim's SOAP endpoint for a new REST session, with the
// credentials of its login (as vCenter's vAPI endpoint does), and remembers the binding.
func (f *front) bindRESTSession(id, user, password string) {
	var u, p bytes.Buffer
	_ = xml.EscapeText(&u, []byte(user))
	_ = xml.EscapeText(&p, []byte(password))
	body := fmt.Sprintf(loginXML, u.String(), p.String())
	req := httptest.NewRequest(http.MethodPost, "/sdk", strings.NewReader(body))
	req.Header.Set("Content-Type", "text/xml; charset=utf-8")
	req.Header.Set("User-Agent", "vAPI-endpoint (vspheresim)")
	rec := httptest.NewRecorder()
	f.next.ServeHTTP(rec, req)
	for _, c := range rec.Result().Cookies() {
		if c.Name == soapCookie && c.Value != "" {
			wire.mu.Lock()
			wire.restBound[id] = c.Value
			wire.mu.Unlock()
			return
		}
	}
	log.Printf("vspheresim: no SOAP session for REST session (login answered %d)", rec.Code)
}

// endRESTSession ends the SOAP session bound to a REST session that logged out.
func (f *front) endRESTSession(id string) {
	wire.mu.Lock()
	key, ok := wire.restBound[id]
	wire.mu.Unlock()
	if !ok || !soapSessionLive(f.reg, key) {
		return
	}
	ctx := &simulator.Context{Context: context.Background(), Map: f.reg,
		Session: &simulator.Session{UserSession: types.UserSession{Key: "gpupool-sim-admin"}}}
	f.reg.SessionManager().TerminateSession(ctx, &types.TerminateSession{SessionId: []string{key}})
}

const loginXML = `<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body><Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>%s</userName><password>%s</password></Login></soapenv:Body>
</soapenv:Envelope>`

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// soapAllowedWithoutSession are the calls vCenter answers without a session.
var soapAllowedWithoutSession = map[string]bool{
	"RetrieveServiceContent": true, "Login": true, "LoginByToken": true,
	"LoginExtensionByCertificate": true, "LoginExtensionBySubjectName": true, "CloneSession": true,
}

// soapCall is what the front needs from a SOAP request body: the target
// (_this) and, for property retrievals, the object types read.
type soapCall struct {
	thisType, thisValue string
	prop                string // Fetch
	types               []string
}

func parseSOAPCall(body []byte) soapCall {
	var c soapCall
	d := xml.NewDecoder(bytes.NewReader(body))
	var stack []string
	for {
		tok, err := d.Token()
		if err != nil {
			return c
		}
		switch t := tok.(type) {
		case xml.StartElement:
			stack = append(stack, t.Name.Local)
			for _, a := range t.Attr {
				if a.Name.Local != "type" {
					continue
				}
				switch t.Name.Local {
				case "_this":
					c.thisType = a.Value
				case "obj":
					c.types = append(c.types, a.Value)
				}
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) == 0 {
				continue
			}
			switch stack[len(stack)-1] {
			case "_this":
				c.thisValue += strings.TrimSpace(string(t))
			case "prop":
				c.prop += strings.TrimSpace(string(t))
			case "type":
				if v := strings.TrimSpace(string(t)); v != "" {
					c.types = append(c.types, v)
				}
			}
		}
	}
}

// anonymousRead: ServiceInstance and SessionManager properties (content,
// currentSession: privilege System.Anonymous) are readable without a session;
// reading currentSession is how clients see that their session is gone.
func (c soapCall) anonymousRead(method string) bool {
	anonymous := func(t string) bool { return t == "ServiceInstance" || t == "SessionManager" }
	switch method {
	case "Fetch":
		return anonymous(c.thisType)
	case "RetrieveProperties", "RetrievePropertiesEx":
		if len(c.types) == 0 {
			return false
		}
		for _, t := range c.types {
			if !anonymous(t) {
				return false
			}
		}
		return true
	}
	return false
}

const notAuthenticatedXML = `<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/" xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body>
<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>The session is not authenticated.</faultstring><detail><NotAuthenticatedFault xmlns="urn:vim25" xsi:type="NotAuthenticated"><object type="%s">%s</object><privilegeId>System.View</privilegeId></NotAuthenticatedFault></detail></soapenv:Fault>
</soapenv:Body>
</soapenv:Envelope>`

const emptyFetchXML = `<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/" xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body>
<FetchResponse xmlns="urn:vim25"></FetchResponse>
</soapenv:Body>
</soapenv:Envelope>`

// rejectKilledSOAP answers NotAuthenticated, as vCenter does, to a call made
// with the cookie of a session that has ended: terminated (TerminateSession,
// /_sim/sessions/kill, an outage), logged out, or never known. vcsim itself
// serves Fetch and property retrievals without a session; vCenter does not.
func rejectKilledSOAP(reg *simulator.Registry, w http.ResponseWriter, r *http.Request, method string, body []byte) bool {
	cookie, err := r.Cookie(soapCookie)
	if err != nil || cookie.Value == "" || soapAllowedWithoutSession[method] {
		return false
	}
	if soapSessionLive(reg, cookie.Value) {
		return false
	}
	call := parseSOAPCall(body)
	if method == "Fetch" && call.thisType == "SessionManager" && call.prop == "currentSession" {
		// vCenter: no session, no currentSession (vcsim would answer NotAuthenticated)
		w.Header().Set("Content-Type", "text/xml; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, emptyFetchXML)
		return true
	}
	if call.anonymousRead(method) {
		return false
	}
	var typ, val bytes.Buffer
	_ = xml.EscapeText(&typ, []byte(call.thisType))
	_ = xml.EscapeText(&val, []byte(call.thisValue))
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = fmt.Fprintf(w, notAuthenticatedXML, typ.String(), val.String())
	return true
}

func restSessionID(r *http.Request) string {
	if id := r.Header.Get(restHeader); id != "" {
		return id
	}
	if c, err := r.Cookie(restHeader); err == nil {
		return c.Value
	}
	return ""
}

// restSessionCreate tells whether a request logs in to the REST API.
func restSessionCreate(r *http.Request) bool {
	if r.Method != http.MethodPost || r.URL.RawQuery != "" {
		return false
	}
	return r.URL.Path == "/api/session" || r.URL.Path == legacySessionPath
}

// rejectKilledREST answers 401 UNAUTHENTICATED, as vCenter does, to a call
// made with a REST session id whose SOAP session has ended (/api and /rest
// error shapes).
func rejectKilledREST(reg *simulator.Registry, w http.ResponseWriter, r *http.Request) bool {
	if restSessionCreate(r) {
		return false
	}
	id := restSessionID(r)
	if id == "" {
		return false
	}
	wire.mu.Lock()
	key, bound := wire.restBound[id]
	wire.mu.Unlock()
	if !bound || soapSessionLive(reg, key) {
		return false
	}
	msg := []map[string]any{{"args": []string{}, "default_message": "Authentication required.",
		"id": "com.vmware.vapi.endpoint.method.authentication.required"}}
	w.Header().Set("WWW-Authenticate", `Basic realm="VAPI endpoint",SIGN realm="VAPI endpoint",service="VAPI endpoint"`)
	if strings.HasPrefix(r.URL.Path, "/rest") {
		writeJSON(w, http.StatusUnauthorized, map[string]any{
			"type": "com.vmware.vapi.std.errors.unauthenticated", "value": map[string]any{"messages": msg}})
	} else {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error_type": "UNAUTHENTICATED", "messages": msg})
	}
	return true
}

// sessionRecorder passes a login's answer through and keeps its body, to
// learn the new REST session id; bind is handed the id.
type sessionRecorder struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
	bind func(id string)
}

func (s *sessionRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *sessionRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	s.body.Write(b)
	return s.ResponseWriter.Write(b)
}

func (s *sessionRecorder) remember() {
	if s.code != http.StatusOK && s.code != http.StatusCreated {
		return
	}
	var id string
	if err := json.Unmarshal(s.body.Bytes(), &id); err != nil {
		var wrapped struct {
			Value string `json:"value"`
		}
		if json.Unmarshal(s.body.Bytes(), &wrapped) != nil {
			return
		}
		id = wrapped.Value
	}
	if id == "" || s.bind == nil {
		return
	}
	s.bind(id)
}

// ---- outage -----------------------------------------------------------------------------

// outage closes the listener and every client connection, drops all
// sessions, and listens again on the same address after d. State is kept.
func (f *front) outage(d time.Duration) {
	time.Sleep(50 * time.Millisecond) // the admin answer goes out first
	addr := f.srv.Listener.Addr().String()
	soapN, restN := f.killSessions()
	_ = f.srv.Listener.Close()
	f.srv.CloseClientConnections()
	log.Printf("vspheresim: outage of %s started (%d SOAP, %d REST sessions dropped)", d, soapN, restN)
	time.Sleep(d)
	var l net.Listener
	var err error
	for i := 0; i < 100; i++ {
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		log.Fatalf("vspheresim: cannot listen on %s again after the outage: %v", addr, err)
	}
	tl := tls.NewListener(l, f.srv.TLS)
	f.srv.Listener = tl
	go func() { _ = f.srv.Config.Serve(tl) }()
	wire.mu.Lock()
	wire.outage = false
	wire.mu.Unlock()
	log.Printf("vspheresim: outage over, listening on %s again", addr)
}

// ---- admin endpoints ----------------------------------------------------------------------

// faultAdmin serves the admin endpoints of this file; false when p is not one.
func (f *front) faultAdmin(w http.ResponseWriter, r *http.Request, p string) bool {
	switch {
	case p == "/_sim/sessions/kill" && r.Method == http.MethodPost:
		soapN, restN := f.killSessions()
		writeJSON(w, http.StatusOK, map[string]int{"soap": soapN, "rest": restN})
	case p == "/_sim/outage" && r.Method == http.MethodPost:
		var req struct {
			Seconds float64 `json:"seconds"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Seconds <= 0 || req.Seconds > 3600 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "seconds must be a number in (0, 3600]"})
			return true
		}
		wire.mu.Lock()
		busy := wire.outage
		wire.outage = true
		wire.mu.Unlock()
		if busy {
			writeJSON(w, http.StatusConflict, map[string]string{"error": "an outage is already starting"})
			return true
		}
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusOK, map[string]any{"seconds": req.Seconds, "starts_in_seconds": 0.05, "sessions": "dropped"})
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		go f.outage(time.Duration(req.Seconds * float64(time.Second)))
	case (p == "/_sim/rest_faults" || p == "/_sim/soap_faults") && r.Method == http.MethodPost:
		rule := new(wireRule)
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(rule); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return true
		}
		rule.Hits = 0
		if err := wire.addRule(rule, p == "/_sim/soap_faults"); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return true
		}
		writeJSON(w, http.StatusOK, rule)
	case (p == "/_sim/rest_faults" || p == "/_sim/soap_faults") && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, wire.rules(p == "/_sim/soap_faults"))
	case (p == "/_sim/rest_faults" || p == "/_sim/soap_faults") && r.Method == http.MethodDelete:
		writeJSON(w, http.StatusOK, map[string]int{"cleared": wire.clearRules(p == "/_sim/soap_faults")})
	default:
		return false
	}
	return true
}
