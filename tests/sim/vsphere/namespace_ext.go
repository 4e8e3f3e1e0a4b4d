package main

// Namespaces, VM classes, storage policies and content libraries as vCenter 8.0 U3's
// Automation API serves them (/api/...), replacing govmomi's in-memory stubs, which
// keep only a few fields (no description, access list, storage specs or limits), and
// accept anything. What is kept and checked here:
//
//   - /api/vcenter/namespace-management/virtual-machine-classes[/{id}]: GET, POST, PATCH
//     (fields present replace), DELETE, with the memory field spelt memory_MB as the API
//     does (CreateSpec, UpdateSpec, Info). 400 on a CreateSpec without id, cpu_count or
//     memory_MB, an id that is not a DNS label, a duplicate id, config_spec
//     numCPUs/memoryMB that differ from cpu_count/memory_MB, a vGPU with memory_reservation
//     below 100.
//   - /api/vcenter/namespaces/instances[/{ns}]: GET, POST (CreateSpec; POST .../v2 with
//     a supervisor, whose id here is its cluster's), PATCH
//     (UpdateSpec: fields present replace, lists included), DELETE. 400 on a name that
//     is not a DNS label, an existing name, a cluster that is not a Supervisor, an
//     unknown storage policy, VM class or content library, an access role outside
//     OWNER/EDIT/VIEW.
//   - /api/vcenter/namespaces/instances/{ns}/access/{domain}/{subject}?type=USER|GROUP:
//     GET, POST (exists: 400), PUT, DELETE.
//   - /api/vcenter/storage/policies: the default policies of a vCenter with vSAN.
//   - /api/content/library[/{id}] and POST /api/content/local-library: through vcsim's
//     /rest content library, so both forms see the same libraries (a library created
//     without storage_backings is put on the first datastore); a library is answered with
//     the fields of the API's LibraryModel only (vcsim adds its own).
//
// Authentication is vcsim's: every call is checked against its session store.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

const (
	vmClassesPath   = "/api/vcenter/namespace-management/virtual-machine-classes"
	namespacesPath  = "/api/vcenter/namespaces/instances"
	policiesPath    = "/api/vcenter/storage/policies"
	libraryPath     = "/api/content/library"
	localLibPath    = "/api/content/local-library"
	legacyLibPath   = "/rest/com/vmware/content/library"
	legacyLocalPath = "/rest/com/vmware/content/local-library"
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

type storagePolicy struct {
	Policy      string `json:"policy"`
	Name        string `json:"name"`
	Description string `json:"description"`
}

var defaultPolicies = []storagePolicy{
	{"aa6d5a82-1c88-45da-85d3-3d74b91a5bad", "vSAN Default Storage Policy", "Storage policy used as default for vSAN datastores"},
	{"4d5f673c-536f-11e6-beb8-9e71128cae77", "VM Encryption Policy", "Sample storage policy for VMware's VM and virtual disk encryption"},
	{"f4e5bade-15a2-4805-bf8e-52318c4ce443", "Management Storage Policy - Thin", "Management Storage policy used for VMC"},
	{"c7e5bade-15a2-4805-bf8e-52318c4ce551", "gpu-nvme-gold", "Tag-based placement on the NVMe datastores of the GPU hosts"},
}

type restExt struct {
	mu         sync.Mutex
	svc        *simulator.Service
	reg        *simulator.Registry
	classes    map[string]map[string]any
	namespaces map[string]map[string]any
}

// HandleFunc swallows the registrations of govmomi's stubs for the same paths
// (vcsim hands them to the handler already registered there).
func (e *restExt) HandleFunc(string, func(http.ResponseWriter, *http.Request)) {}

func init() {
	simulator.RegisterEndpoint(func(s *simulator.Service, r *simulator.Registry) {
		if !r.IsVPX() {
			return
		}
		e := &restExt{svc: s, reg: r, classes: map[string]map[string]any{}, namespaces: map[string]map[string]any{}}
		theRestExt = e // the zone bindings (zones_ext.go) see its classes and namespaces
		for _, p := range []string{vmClassesPath, namespacesPath, policiesPath, libraryPath, localLibPath} {
			s.ServeMux.Handle(p, e)
			s.ServeMux.Handle(p+"/", e)
		}
	})
}

func apiError(w http.ResponseWriter, code int, kind, format string, args ...any) {
	writeJSON(w, code, map[string]any{
		"error_type": kind,
		"messages":   []map[string]any{{"id": "vcsim.gpupool." + strings.ToLower(kind), "default_message": fmt.Sprintf(format, args...), "args": []string{}}},
	})
}

func notAllowed(w http.ResponseWriter) {
	apiError(w, http.StatusMethodNotAllowed, "OPERATION_NOT_FOUND", "method not allowed")
}

// readSpec decodes a JSON body; a body that is not JSON is answered 400 and gives false.
func readSpec(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	var spec map[string]any
	if err := json.NewDecoder(r.Body).Decode(&spec); err != nil {
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "body: %v", err)
		return nil, false
	}
	return spec, true
}

// rejected answers a failed check (msg not empty) with 400 and says whether it did.
func rejected(w http.ResponseWriter, msg string) bool {
	if msg != "" {
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "%s", msg)
		return true
	}
	return false
}

// badNewName answers a create whose name is not a DNS label or is taken (400) and says whether it did;
// label names the field in the message ("VM class id"), kind the object ("VM class").
func badNewName[T any](w http.ResponseWriter, have map[string]T, name, label, kind string) bool {
	if !dnsLabel.MatchString(name) {
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "%s %q is not a DNS label", label, name)
		return true
	}
	if _, ok := have[name]; ok {
		apiError(w, http.StatusBadRequest, "ALREADY_EXISTS", "%s %s already exists", kind, name)
		return true
	}
	return false
}

// oneObject answers the methods on one stored object: GET with info, PATCH by storing what
// update makes of the body unless its check message says why not (400), DELETE.
func oneObject(w http.ResponseWriter, r *http.Request, store map[string]map[string]any, id string, info map[string]any,
	update func(spec map[string]any) (map[string]any, string)) {
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, info)
	case http.MethodPatch:
		spec, ok := readSpec(w, r)
		if !ok {
			return
		}
		next, msg := update(spec)
		if rejected(w, msg) {
			return
		}
		store[id] = next
		w.WriteHeader(http.StatusNoContent)
	case http.MethodDelete:
		delete(store, id)
		w.WriteHeader(http.StatusNoContent)
	default:
		notAllowed(w)
	}
}

func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// inner runs a request against vcsim's own handlers (session check, /rest library).
func (e *restExt) inner(r *http.Request, method, path string, body io.Reader) *httptest.ResponseRecorder {
	req, _ := http.NewRequest(method, path, body)
	req.Header = r.Header.Clone()
	req.URL.Scheme, req.URL.Host, req.Host = "https", r.Host, r.Host
	rec := httptest.NewRecorder()
	e.svc.ServeMux.ServeHTTP(rec, req)
	return rec
}

func (e *restExt) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rec := e.inner(r, http.MethodGet, legacySessionPath, nil); rec.Code != http.StatusOK {
		apiError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Authentication required.")
		return
	}
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case p == policiesPath || strings.HasPrefix(p, policiesPath+"/"):
		if r.Method != http.MethodGet {
			notAllowed(w)
			return
		}
		writeJSON(w, http.StatusOK, defaultPolicies)
	case p == libraryPath || strings.HasPrefix(p, libraryPath+"/") || p == localLibPath:
		e.library(w, r, p)
	case p == vmClassesPath || strings.HasPrefix(p, vmClassesPath+"/"):
		// VM classes: VirtualMachineClasses.Manage on the vCenter (README.md, "Accounts and privileges")
		if r.Method != http.MethodGet && restRefusal(w, r, e.reg, rootFolder(e.reg), "VirtualMachineClasses.Manage") {
			return
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.vmClasses(w, r, strings.TrimPrefix(strings.TrimPrefix(p, vmClassesPath), "/"))
	default:
		e.mu.Lock()
		defer e.mu.Unlock()
		route := strings.Split(strings.TrimPrefix(strings.TrimPrefix(p, namespacesPath), "/"), "/")
		// namespaces: Namespaces.Manage on the cluster of the Supervisor (README.md, "Accounts and privileges")
		if r.Method != http.MethodGet {
			if cluster := e.namespaceCluster(r, route[0]); cluster != "" &&
				restRefusal(w, r, e.reg, types.ManagedObjectReference{Type: "ClusterComputeResource", Value: cluster}, "Namespaces.Manage") {
				return
			}
		}
		e.namespacesAPI(w, r, route)
	}
}

// namespaceCluster is the cluster (moid) a namespace write is about: the namespace's own, or
// for a create the body's cluster (v2: its supervisor, whose id here is its cluster's). The
// body is read and put back for the handler.
func (e *restExt) namespaceCluster(r *http.Request, name string) string {
	if ns, ok := e.namespaces[name]; ok && name != "" && name != "v2" {
		c, _ := ns["cluster"].(string)
		return c
	}
	if r.Body == nil {
		return ""
	}
	data, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(data))
	var spec map[string]any
	_ = json.Unmarshal(data, &spec)
	if c, ok := spec["cluster"].(string); ok {
		return c
	}
	c, _ := spec["supervisor"].(string)
	return c
}

// ---- content libraries (through vcsim's /rest API) ----------------------------------

func (e *restExt) library(w http.ResponseWriter, r *http.Request, p string) {
	unwrap := func(rec *httptest.ResponseRecorder, code int) {
		if rec.Code >= 300 {
			apiError(w, rec.Code, "NOT_FOUND", "content library not found")
			return
		}
		var body struct {
			Value json.RawMessage `json:"value"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write(body.Value)
	}
	switch {
	case p == localLibPath && r.Method == http.MethodPost:
		spec, ok := readSpec(w, r)
		if !ok {
			return
		}
		if len(asList(spec["storage_backings"])) == 0 {
			// vcsim keeps library files on a datastore: default to the first one
			for _, ds := range e.reg.All("Datastore") {
				spec["storage_backings"] = []any{map[string]any{"type": "DATASTORE", "datastore_id": ds.Reference().Value}}
				break
			}
		}
		b, _ := json.Marshal(map[string]any{"create_spec": spec})
		unwrap(e.inner(r, http.MethodPost, legacyLocalPath, strings.NewReader(string(b))), http.StatusCreated)
	case p == libraryPath && r.Method == http.MethodGet:
		unwrap(e.inner(r, http.MethodGet, legacyLibPath, nil), http.StatusOK)
	case strings.HasPrefix(p, libraryPath+"/") && r.Method == http.MethodGet:
		id := strings.TrimPrefix(p, libraryPath+"/")
		rec := e.inner(r, http.MethodGet, legacyLibPath+"/id:"+url.PathEscape(id), nil)
		if rec.Code < 300 {
			rec.Body = bytes.NewBuffer(libraryModel(rec.Body.Bytes()))
		}
		unwrap(rec, http.StatusOK)
	default:
		notAllowed(w)
	}
}

// libraryModelFields are the fields of com.vmware.content.LibraryModel.
var libraryModelFields = []string{"id", "creation_time", "description", "last_modified_time", "last_sync_time",
	"name", "storage_backings", "type", "optimization_info", "version", "publish_info", "subscription_info",
	"server_guid", "security_policy_id", "unset_security_policy_id", "configuration_info", "state_info"}

// libraryModel keeps the LibraryModel fields of vcsim's /rest answer ({"value": {...}}).
func libraryModel(body []byte) []byte {
	var wrapped struct {
		Value map[string]json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(body, &wrapped); err != nil || wrapped.Value == nil {
		return body
	}
	out := map[string]json.RawMessage{}
	for _, k := range libraryModelFields {
		if v, ok := wrapped.Value[k]; ok && string(v) != "null" {
			out[k] = v
		}
	}
	b, _ := json.Marshal(map[string]any{"value": out})
	return b
}

func (e *restExt) libraryIDs(r *http.Request) map[string]bool {
	rec := e.inner(r, http.MethodGet, legacyLibPath, nil)
	var body struct {
		Value []string `json:"value"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	out := map[string]bool{}
	for _, id := range body.Value {
		out[id] = true
	}
	return out
}

// ---- VM classes ---------------------------------------------------------------------

func num(v any) (int64, bool) {
	f, ok := v.(float64)
	return int64(f), ok
}

// classFields copies the CreateSpec/UpdateSpec fields present in spec into c.
func classFields(c, spec map[string]any) {
	for _, k := range []string{"cpu_count", "cpu_reservation", "memory_MB", "memory_reservation", "description", "devices", "config_spec", "instance_storage"} {
		if v, ok := spec[k]; ok {
			c[k] = v
		}
	}
}

func classHasVgpu(c map[string]any) bool {
	if d, ok := c["devices"].(map[string]any); ok {
		if l, ok := d["vgpu_devices"].([]any); ok && len(l) > 0 {
			return true
		}
	}
	if cs, ok := c["config_spec"].(map[string]any); ok {
		changes, _ := cs["deviceChange"].([]any)
		for _, ch := range changes {
			dev, _ := ch.(map[string]any)["device"].(map[string]any)
			backing, _ := dev["backing"].(map[string]any)
			if backing["_typeName"] == "VirtualPCIPassthroughVmiopBackingInfo" {
				return true
			}
		}
	}
	return false
}

func classCheck(c map[string]any) string {
	if cs, ok := c["config_spec"].(map[string]any); ok {
		if n, ok := num(cs["numCPUs"]); ok {
			if cpu, _ := num(c["cpu_count"]); cpu != n {
				return fmt.Sprintf("config_spec.numCPUs %d differs from cpu_count %d", n, cpu)
			}
		}
		if n, ok := num(cs["memoryMB"]); ok {
			if mem, _ := num(c["memory_MB"]); mem != n {
				return fmt.Sprintf("config_spec.memoryMB %d differs from memory_MB %d", n, mem)
			}
		}
	}
	if classHasVgpu(c) {
		if res, _ := num(c["memory_reservation"]); res != 100 {
			return "a VM class with a vGPU device needs memory_reservation 100"
		}
	}
	return ""
}

func (e *restExt) classInfo(id string, c map[string]any) map[string]any {
	out := map[string]any{"id": id, "config_status": "READY", "messages": []any{}, "vms": []string{}}
	for k, v := range c {
		out[k] = v
	}
	if _, ok := out["description"]; !ok {
		out["description"] = ""
	}
	used := []string{}
	for name, ns := range e.namespaces {
		if vs, ok := ns["vm_service_spec"].(map[string]any); ok {
			for _, v := range asList(vs["vm_classes"]) {
				if v == id {
					used = append(used, name)
				}
			}
		}
	}
	sort.Strings(used)
	out["namespaces"] = used
	return out
}

func (e *restExt) vmClasses(w http.ResponseWriter, r *http.Request, id string) {
	switch {
	case id == "" && r.Method == http.MethodGet:
		ids := sortedKeys(e.classes)
		out := make([]map[string]any, 0, len(ids))
		for _, k := range ids {
			out = append(out, e.classInfo(k, e.classes[k]))
		}
		writeJSON(w, http.StatusOK, out)
	case id == "" && r.Method == http.MethodPost:
		spec, ok := readSpec(w, r)
		if !ok {
			return
		}
		name, _ := spec["id"].(string)
		if badNewName(w, e.classes, name, "VM class id", "VM class") {
			return
		}
		for _, k := range []string{"cpu_count", "memory_MB"} {
			if _, ok := num(spec[k]); !ok {
				apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "VM class %s: %s is required", name, k)
				return
			}
		}
		c := map[string]any{}
		classFields(c, spec)
		if rejected(w, classCheck(c)) {
			return
		}
		e.classes[name] = c
		w.WriteHeader(http.StatusNoContent)
	case id != "":
		c, ok := e.classes[id]
		if !ok {
			apiError(w, http.StatusNotFound, "NOT_FOUND", "VM class %s not found", id)
			return
		}
		oneObject(w, r, e.classes, id, e.classInfo(id, c), func(spec map[string]any) (map[string]any, string) {
			next := map[string]any{}
			classFields(next, c)
			classFields(next, spec)
			return next, classCheck(next)
		})
	default:
		notAllowed(w)
	}
}

// ---- namespaces ---------------------------------------------------------------------

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

var nsFields = []string{"description", "access_list", "storage_specs", "vm_service_spec", "resource_spec", "content_libraries"}

// nsUpdate copies the CreateSpec/UpdateSpec fields present (and not null) in spec into ns.
func nsUpdate(ns, spec map[string]any) {
	for _, k := range nsFields {
		if v, ok := spec[k]; ok && v != nil {
			ns[k] = v
		}
	}
}

func (e *restExt) nsCheck(r *http.Request, ns map[string]any) string {
	policies := map[string]bool{}
	for _, p := range defaultPolicies {
		policies[p.Policy] = true
	}
	for _, s := range asList(ns["storage_specs"]) {
		m, _ := s.(map[string]any)
		if p, _ := m["policy"].(string); !policies[p] {
			return fmt.Sprintf("storage policy %q not found", p)
		}
	}
	for _, a := range asList(ns["access_list"]) {
		m, _ := a.(map[string]any)
		if msg := accessCheck(m["role"], m["subject_type"]); msg != "" {
			return msg
		}
	}
	if vs, ok := ns["vm_service_spec"].(map[string]any); ok {
		for _, c := range asList(vs["vm_classes"]) {
			if _, ok := e.classes[fmt.Sprint(c)]; !ok {
				return fmt.Sprintf("VM class %v not found", c)
			}
		}
		if libs := asList(vs["content_libraries"]); len(libs) > 0 {
			have := e.libraryIDs(r)
			for _, l := range libs {
				if !have[fmt.Sprint(l)] {
					return fmt.Sprintf("content library %v not found", l)
				}
			}
		}
	}
	return ""
}

func accessCheck(role, kind any) string {
	switch role {
	case "OWNER", "EDIT", "VIEW":
	default:
		return fmt.Sprintf("access role %v is not one of OWNER, EDIT, VIEW", role)
	}
	switch kind {
	case "USER", "GROUP":
	default:
		return fmt.Sprintf("subject type %v is not USER or GROUP", kind)
	}
	return ""
}

func (e *restExt) namespacesAPI(w http.ResponseWriter, r *http.Request, route []string) {
	name := route[0]
	v2 := name == "v2" && len(route) == 1 && r.Method == http.MethodPost
	if v2 {
		name = "" // the v2 create names a Supervisor; here a Supervisor's id is its cluster's
	}
	if name == "v2" && len(route) == 2 && r.Method == http.MethodGet {
		e.namespaceV2(w, route[1]) // Instances.get_v2 (zones_ext.go reads InfoV2.zones)
		return
	}
	switch {
	case name == "" && r.Method == http.MethodGet:
		out := []map[string]any{}
		for _, k := range sortedKeys(e.namespaces) {
			ns := e.namespaces[k]
			out = append(out, map[string]any{"namespace": k, "cluster": ns["cluster"], "description": ns["description"],
				"config_status": "RUNNING", "stats": namespaceStats()})
		}
		writeJSON(w, http.StatusOK, out)
	case name == "" && r.Method == http.MethodPost:
		spec, ok := readSpec(w, r)
		if !ok {
			return
		}
		ns, _ := spec["namespace"].(string)
		if badNewName(w, e.namespaces, ns, "namespace name", "namespace") {
			return
		}
		cluster, _ := spec["cluster"].(string)
		if v2 {
			cluster, _ = spec["supervisor"].(string)
		}
		sim.mu.Lock()
		enabled := sim.supervisors[cluster]
		sim.mu.Unlock()
		if !enabled {
			apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "cluster %s is not enabled for vSphere Supervisor", cluster)
			return
		}
		rec := map[string]any{"cluster": cluster, "description": "", "access_list": []any{}, "storage_specs": []any{},
			"vm_service_spec": map[string]any{"vm_classes": []any{}, "content_libraries": []any{}}, "resource_spec": map[string]any{}}
		nsUpdate(rec, spec)
		if rejected(w, e.nsCheck(r, rec)) {
			return
		}
		if z, given := spec["zones"]; given && z != nil {
			if !v2 { // CreateSpec (v1) has no zones; CreateSpecV2 has them from API 9.0.0.0
				apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "zones: no such field of the CreateSpec (use the v2 create)")
				return
			}
			zones, msg := e.applyZones(ns, cluster, nil, z)
			if rejected(w, msg) {
				return
			}
			rec["zones"] = zones
		}
		e.namespaces[ns] = rec
		w.WriteHeader(http.StatusNoContent)
	case name != "":
		ns, ok := e.namespaces[name]
		if !ok {
			apiError(w, http.StatusNotFound, "NOT_FOUND", "namespace %s not found", name)
			return
		}
		if len(route) >= 4 && route[1] == "access" {
			e.access(w, r, ns, route[2], strings.Join(route[3:], "/"))
			return
		}
		if len(route) == 3 && route[1] == "zones" && zonesServed() {
			e.deleteZone(w, r, ns, route[2]) // Instances.Zones.delete (zones_ext.go)
			return
		}
		if len(route) > 1 {
			apiError(w, http.StatusNotFound, "NOT_FOUND", "no such operation")
			return
		}
		info := map[string]any{"config_status": "RUNNING", "messages": []any{}, "self_service_namespace": false,
			"stats": namespaceStats()}
		maps.Copy(info, ns)
		delete(info, "zones") // Instances.Info has none: they are read through get_v2
		oneObject(w, r, e.namespaces, name, info, func(spec map[string]any) (map[string]any, string) {
			next := maps.Clone(ns)
			nsUpdate(next, spec)
			if msg := e.nsCheck(r, next); msg != "" {
				return nil, msg
			}
			if z, given := spec["zones"]; given && z != nil {
				cluster, _ := ns["cluster"].(string)
				zones, msg := e.applyZones(name, cluster, nsZones(ns), z)
				if msg != "" {
					return nil, msg
				}
				next["zones"] = zones
			}
			return next, ""
		})
	default:
		notAllowed(w)
	}
}

// namespaceStats is a namespace's com.vmware.vcenter.namespaces.Instances.Stats: nothing runs
// in a simulated namespace, so nothing is used.
func namespaceStats() map[string]any {
	return map[string]any{"cpu_used": 0, "memory_used": 0, "storage_used": 0}
}

func (e *restExt) access(w http.ResponseWriter, r *http.Request, ns map[string]any, domain, subject string) {
	kind := r.URL.Query().Get("type")
	missing := func() {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "no access entry for %s %s@%s", kind, subject, domain)
	}
	list := asList(ns["access_list"])
	idx := -1
	for i, a := range list {
		m, _ := a.(map[string]any)
		if m["domain"] == domain && m["subject"] == subject && m["subject_type"] == kind {
			idx = i
		}
	}
	switch r.Method {
	case http.MethodGet:
		if idx < 0 {
			missing()
			return
		}
		m := list[idx].(map[string]any)
		writeJSON(w, http.StatusOK, map[string]any{"role": m["role"], "inherited": false})
	case http.MethodPost, http.MethodPut:
		spec, ok := readSpec(w, r)
		if !ok || rejected(w, accessCheck(spec["role"], kind)) {
			return
		}
		if r.Method == http.MethodPost && idx >= 0 {
			apiError(w, http.StatusBadRequest, "ALREADY_EXISTS", "access entry for %s %s@%s exists", kind, subject, domain)
			return
		}
		if r.Method == http.MethodPut && idx < 0 {
			missing()
			return
		}
		entry := map[string]any{"domain": domain, "subject": subject, "subject_type": kind, "role": spec["role"]}
		next := append([]any{}, list...)
		if idx >= 0 {
			next[idx] = entry
		} else {
			next = append(next, entry)
		}
		ns["access_list"] = next
		w.WriteHeader(http.StatusNoContent)
	case http.MethodDelete:
		if idx < 0 {
			missing()
			return
		}
		ns["access_list"] = append(append([]any{}, list[:idx]...), list[idx+1:]...)
		w.WriteHeader(http.StatusNoContent)
	default:
		notAllowed(w)
	}
}
