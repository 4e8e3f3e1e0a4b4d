package main

// The vSphere API version the simulator presents (-api-version, default
// 8.0.3). vcsim itself only has ServiceContent.About.ApiVersion, which its
// /sdk/vimServiceVersions.xml echoes with the prior versions 6.0 and 5.5, and
// it answers a SOAP call whatever version the client names. A vCenter lists
// every version it still serves and refuses a call that names another one;
// both are done here, in front of vcsim.

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/vmware/govmomi/simulator"
)

const apiVersionEnv = "VSPHERESIM_API_VERSION"

// presentation is what a vCenter of one release announces.
type presentation struct {
	API      string   // About.apiVersion and the vim25 <version>
	Version  string   // About.version
	FullName string   // About.fullName
	Build    string   // About.build (empty: vcsim's)
	Prior    []string // <priorVersions> of urn:vim25, newest first
}

// The versions a vCenter 8.0 U3 lists as prior (vimServiceVersions.xml).
var priorTo803 = []string{
	"8.0.2.0", "8.0.1.0", "8.0.0.2", "8.0.0.1", "8.0.0.0",
	"7.0.3.2", "7.0.3.1", "7.0.3.0", "7.0.2.1", "7.0.2.0", "7.0.1.1", "7.0.1.0", "7.0.0.2", "7.0.0.0",
	"6.9.1", "6.8.7", "6.7.3", "6.7.2", "6.7.1", "6.7", "6.5", "6.0", "5.5", "5.1", "5.0", "4.1", "4.0",
}

var presentations = map[string]presentation{
	"8.0.3.0": {
		API: "8.0.3.0", Version: "8.0.3", Build: "24022515",
		FullName: "VMware vCenter Server 8.0.3 build-24022515 (gpupool simulator)",
		Prior:    priorTo803,
	},
	"9.0.0.0": {
		API: "9.0.0.0", Version: "9.0.0",
		FullName: "VMware vCenter Server 9.0.0 (gpupool simulator)",
		Prior:    append([]string{"8.0.3.0"}, priorTo803...),
	},
	// vCenter 9.1: the release that adds direct_path_devices (direct_path.go)
	"9.1.0.0": {
		API: "9.1.0.0", Version: "9.1.0",
		FullName: "VMware vCenter Server 9.1.0 (gpupool simulator)",
		Prior:    append([]string{"9.0.0.0", "8.0.3.0"}, priorTo803...),
	},
}

// presented is the presentation of this run, set by usePresentation.
var presented presentation

// versionSeen counts the vim25 versions client SOAP calls named (SOAPAction).
var versionSeen = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

// lookupPresentation accepts a presented release in two, three or four parts ("9.1", "9.1.0", "9.1.0.0").
func lookupPresentation(v string) (presentation, error) {
	v = strings.TrimSpace(v)
	key := v
	for strings.Count(key, ".") < 3 {
		key += ".0"
	}
	if p, ok := presentations[key]; ok {
		return p, nil
	}
	known := make([]string, 0, len(presentations))
	for k := range presentations {
		known = append(known, k)
	}
	sort.Strings(known)
	return presentation{}, fmt.Errorf("-api-version %q: the simulator presents %s", v, strings.Join(known, " or "))
}

// usePresentation writes the release into the model's ServiceContent.About.
func usePresentation(model *simulator.Model, p presentation) {
	presented = p
	about := &model.ServiceContent.About
	about.ApiVersion = p.API
	about.Version = p.Version
	about.FullName = p.FullName
	if p.Build != "" {
		about.Build = p.Build
	}
}

// accepts reports whether a vim25 version is the presented one or a prior one.
func (p presentation) accepts(v string) bool {
	if v == p.API {
		return true
	}
	for _, prior := range p.Prior {
		if v == prior {
			return true
		}
	}
	return false
}

// serviceVersionsXML is /sdk/vimServiceVersions.xml as a vCenter writes it.
func (p presentation) serviceVersionsXML() string {
	var b strings.Builder
	b.WriteString(xml.Header)
	b.WriteString("<namespaces version=\"1.0\">\n <namespace>\n  <name>urn:vim25</name>\n")
	fmt.Fprintf(&b, "  <version>%s</version>\n  <priorVersions>\n", p.API)
	for _, v := range p.Prior {
		fmt.Fprintf(&b, "   <version>%s</version>\n", v)
	}
	b.WriteString("  </priorVersions>\n </namespace>\n</namespaces>\n")
	return b.String()
}

// serveServiceVersions answers GET /sdk/vimServiceVersions.xml (no session needed).
func serveServiceVersions(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != "/sdk/vimServiceVersions.xml" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = io.WriteString(w, presented.serviceVersionsXML())
	}
	return true
}

// soapVersion splits a SOAPAction header ("urn:vim25/9.0.0.0", quoted or not)
// into namespace and version; ok is false when the header names none.
func soapVersion(r *http.Request) (ns, version, raw string, ok bool) {
	raw = strings.Trim(strings.TrimSpace(r.Header.Get("SOAPAction")), "\"")
	if raw == "" || !strings.HasPrefix(raw, "urn:") {
		return "", "", raw, false
	}
	ns, version, _ = strings.Cut(raw, "/")
	return ns, version, raw, true
}

const unsupportedVersionXML = `<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/" xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body>
<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>Request version &apos;%s&apos; and namespace &apos;%s&apos; are not supported</faultstring><detail><InvalidRequestFault xmlns="urn:vim25" xsi:type="InvalidRequest"></InvalidRequestFault></detail></soapenv:Fault>
</soapenv:Body>
</soapenv:Envelope>`

// checkSOAPVersion counts the vim25 version a client call names and refuses
// (as vCenter does) a version the presented release does not serve. Calls
// without a SOAPAction, in other namespaces (pbm, sms...), or from the
// simulator's own govmomi client (it names govmomi's newest version whatever
// is presented) pass.
func checkSOAPVersion(w http.ResponseWriter, r *http.Request) bool {
	ns, version, raw, ok := soapVersion(r)
	if !ok || ns != "urn:vim25" || internalClient(r) {
		return false
	}
	versionSeen.Lock()
	versionSeen.n[version]++
	versionSeen.Unlock()
	if presented.accepts(version) {
		return false
	}
	var rv, rns bytes.Buffer
	_ = xml.EscapeText(&rv, []byte(raw))
	_ = xml.EscapeText(&rns, []byte(ns))
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = fmt.Fprintf(w, unsupportedVersionXML, rv.String(), rns.String())
	return true
}

// versionStats is the "versions" part of GET /_sim/stats: {version: calls}.
func versionStats() map[string]int {
	versionSeen.Lock()
	defer versionSeen.Unlock()
	out := make(map[string]int, len(versionSeen.n))
	for k, v := range versionSeen.n {
		out[k] = v
	}
	return out
}

func resetVersionStats() {
	versionSeen.Lock()
	versionSeen.n = map[string]int{}
	versionSeen.Unlock()
}
