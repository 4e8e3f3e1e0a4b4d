package main

// The HTTP front: request counting for every vSphere request, the test admin
// endpoints under /_sim/, and the Supervisor cluster listing.

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vapi/namespace"
	"github.com/vmware/govmomi/vim25/types"
)

type counters struct {
	mu    sync.Mutex
	soap  map[string]int
	soapN int
	rest  map[string]int
	restN int
}

func newCounters() *counters {
	return &counters{soap: map[string]int{}, rest: map[string]int{}}
}

func (c *counters) reset() {
	c.mu.Lock()
	c.soap, c.rest, c.soapN, c.restN = map[string]int{}, map[string]int{}, 0, 0
	c.mu.Unlock()
}

// soapMethod returns the name of the first element inside the SOAP Body.
func soapMethod(body []byte) string {
	d := xml.NewDecoder(bytes.NewReader(body))
	inBody := false
	for {
		tok, err := d.Token()
		if err != nil {
			return "unknown"
		}
		if se, ok := tok.(xml.StartElement); ok {
			if inBody {
				return se.Name.Local
			}
			inBody = se.Name.Local == "Body"
		}
	}
}

// internalClient reports requests the simulator makes to itself: govmomi's
// REST simulators log in over HTTP with a govmomi client, whose User-Agent is
// "<program> govmomi/<version> (...)" (the program is vspheresim). They are
// not counted, so the stats show what the client under test sent.
func internalClient(r *http.Request) bool {
	ua := r.UserAgent()
	return strings.HasPrefix(ua, "govmomi") || strings.HasPrefix(ua, "govc") || strings.Contains(ua, " govmomi/")
}

type front struct {
	next  http.Handler
	stats *counters
	reg   *simulator.Registry
	srv   *simulator.Server
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_sim/") {
		f.admin(w, r)
		return
	}
	if serveServiceVersions(w, r) {
		return
	}
	internal := internalClient(r)
	isSOAP := r.Method == http.MethodPost && (r.URL.Path == "/sdk" || strings.HasPrefix(r.URL.Path, "/sdk/"))
	isREST := strings.HasPrefix(r.URL.Path, "/api") || strings.HasPrefix(r.URL.Path, "/rest")
	var body []byte
	method := ""
	if isSOAP && !internal {
		body, _ = io.ReadAll(r.Body)
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		method = soapMethod(body)
	}
	if !internal {
		// Counted first: a request a fault answers was still sent by the client.
		if isSOAP {
			f.stats.mu.Lock()
			f.stats.soap[method]++
			f.stats.soapN++
			f.stats.mu.Unlock()
		} else if isREST {
			f.stats.mu.Lock()
			f.stats.rest[r.Method+" "+r.URL.Path]++
			f.stats.restN++
			f.stats.mu.Unlock()
			countDeprecated(r) // supervisors.go
		}
		// A proxy in front of vCenter answers before vCenter checks the session.
		if isSOAP {
			rule := wire.match(true, method, "")
			if rule != nil && applyRule(w, r, rule) {
				return
			}
			var answered func() // a forward rule answers once vCenter has served the request
			w, answered = forwardRule(w, rule)
			defer answered()
			if checkSOAPVersion(w, r) {
				return
			}
			if rejectKilledSOAP(f.reg, w, r, method, body) {
				return
			}
		} else if isREST {
			rule := wire.match(false, r.Method, r.URL.RequestURI())
			if rule != nil && applyRule(w, r, rule) {
				return
			}
			var answered func() // a forward rule answers once vCenter has served the request
			w, answered = forwardRule(w, rule)
			defer answered()
			// Logged from here on: what follows is vCenter's answer, not a proxy's.
			var logged func()
			w, logged = startRestLog(w, r)
			defer logged()
			if rejectKilledREST(f.reg, w, r) {
				return
			}
			if restSessionCreate(r) {
				user, password, _ := r.BasicAuth()
				rec := &sessionRecorder{ResponseWriter: w, bind: func(id string) { f.bindRESTSession(id, user, password) }}
				defer rec.remember()
				w = rec
			}
			if r.Method == http.MethodDelete && (r.URL.Path == "/api/session" || r.URL.Path == legacySessionPath) {
				id := restSessionID(r)
				defer f.endRESTSession(id)
			}
		}
	}
	if r.URL.Path == "/api/session" {
		f.apiSession(w, r)
		return
	}
	if f.serveSupervisors(w, r) { // Summary and Topology (supervisors.go)
		return
	}
	if f.serveZoneBindings(w, r) { // zone bindings, API 9.0 (zones_ext.go)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/api/vcenter/namespace-management/clusters" {
		f.supervisorClusters(w, r)
		return
	}
	f.next.ServeHTTP(w, r)
}

// supervisorClusters lists the clusters flagged supervisor: true in the fleet
// (and, as vcsim does, any cluster named WCP-*). The request still goes
// through vcsim's handler first so authentication behaves the same.
func (f *front) supervisorClusters(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	f.next.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	var list []namespace.ClusterSummary
	_ = json.Unmarshal(rec.Body.Bytes(), &list)
	have := map[string]bool{}
	for _, c := range list {
		have[c.ID] = true
	}
	names := make([]string, 0, len(sim.clusters))
	for n := range sim.clusters {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ref := sim.clusters[n]
		if sim.supervisors[ref.Value] && !have[ref.Value] {
			list = append(list, namespace.ClusterSummary{
				ID: ref.Value, Name: n,
				ConfigStatus: &namespace.RunningConfigStatus, KubernetesStatus: &namespace.ReadyKubernetesStatus,
			})
		}
	}
	// the API's Summary also carries the cluster's stats (govmomi's type has no such field)
	out := make([]map[string]any, 0, len(list))
	for _, c := range list {
		out = append(out, map[string]any{"cluster": c.ID, "cluster_name": c.Name,
			"config_status": c.ConfigStatus, "kubernetes_status": c.KubernetesStatus, "stats": f.clusterStats(c.ID)})
	}
	writeJSON(w, http.StatusOK, out)
}

// clusterStats is a Supervisor's com.vmware.vcenter.namespace_management.Clusters.Stats: the
// capacity of its hosts (CPU in MHz, memory in MiB) and of the datastores (MiB); nothing runs
// in the simulator, so nothing is used.
func (f *front) clusterStats(moid string) map[string]any {
	const mib = 1 << 20
	var cpu, mem, storage int64
	ctx := &simulator.Context{Context: context.Background(), Map: f.reg}
	if cluster, ok := f.reg.Get(types.ManagedObjectReference{Type: "ClusterComputeResource", Value: moid}).(*simulator.ClusterComputeResource); ok {
		var hosts []types.ManagedObjectReference
		ctx.WithLock(cluster, func() { hosts = append(hosts, cluster.Host...) })
		for _, ref := range hosts {
			if host, ok := f.reg.Get(ref).(*simulator.HostSystem); ok {
				ctx.WithLock(host, func() {
					if hw := host.Summary.Hardware; hw != nil {
						cpu += int64(hw.CpuMhz) * int64(hw.NumCpuCores)
						mem += hw.MemorySize / mib
					}
				})
			}
		}
	}
	for _, e := range f.reg.All("Datastore") {
		if ds, ok := e.(*simulator.Datastore); ok {
			ctx.WithLock(ds, func() { storage += ds.Summary.Capacity / mib })
		}
	}
	return map[string]any{"cpu_used": 0, "cpu_capacity": cpu, "memory_used": 0, "memory_capacity": mem,
		"storage_used": 0, "storage_capacity": storage}
}

// apiSession serves the /api/session form of the Automation API session
// (POST -> 201 "id", GET -> info, DELETE -> 204) through the /rest session
// vcsim implements, so both forms share one session store.
func (f *front) apiSession(w http.ResponseWriter, r *http.Request) {
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/rest/com/vmware/cis/session"
	r2.RequestURI = r2.URL.RequestURI()
	rec := httptest.NewRecorder()
	f.next.ServeHTTP(rec, r2)
	if rec.Code != http.StatusOK {
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	var wrapped struct {
		Value json.RawMessage `json:"value"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &wrapped)
	switch r.Method {
	case http.MethodPost:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(wrapped.Value)
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(wrapped.Value)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *front) admin(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case p == "/_sim/stats" && r.Method == http.MethodGet:
		f.stats.mu.Lock()
		out := map[string]any{
			"soap": map[string]any{"total": f.stats.soapN, "methods": copyMap(f.stats.soap), "versions": versionStats()},
			"rest": map[string]any{"total": f.stats.restN, "paths": copyMap(f.stats.rest), "deprecated": deprecatedStats()},
		}
		f.stats.mu.Unlock()
		out["zones"] = zonesStats()                       // reserved VM classes (zones_ext.go)
		out["ha"] = map[string]any{"failures": haStats()} // host failures (ha_failover.go)
		writeJSON(w, http.StatusOK, out)
	case p == "/_sim/stats/reset" && r.Method == http.MethodPost:
		f.stats.reset()
		resetVersionStats()
		resetDeprecatedStats()
		resetHAStats()
		writeJSON(w, http.StatusOK, map[string]any{"reset": true})
	case p == "/_sim/faults" && r.Method == http.MethodPost:
		f.addFault(w, r)
	case p == "/_sim/faults" && r.Method == http.MethodDelete:
		sim.clearFaults()
		writeJSON(w, http.StatusOK, map[string]any{"cleared": true})
	case p == "/_sim/ssh" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, sshView())
	case f.haAdmin(w, r, p): // host failure and recovery (ha_failover.go)
	case strings.HasPrefix(p, "/_sim/hosts/"):
		f.hostAdmin(w, r, strings.TrimPrefix(p, "/_sim/hosts/"))
	case f.faultAdmin(w, r, p):
	case capacityAdmin(w, r, p):
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such admin endpoint: " + r.Method + " " + r.URL.Path})
	}
}

// Fault ops on hosts and VMs, and whether "hang" applies (task ops only).
var (
	hostFaultOps = map[string]bool{"install": true, "reboot": true, "enter_maintenance": true, "exit_maintenance": true,
		"reboot_hang": false, "update_graphics": false, "update_module_options": false,
		"nvidia_smi": false}
	vmFaultOps = map[string]bool{"power_on": true, "power_off": true}
)

// addFault serves POST /_sim/faults.
func (f *front) addFault(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Host    string `json:"host,omitempty"`
		VM      string `json:"vm,omitempty"`
		Op      string `json:"op"`
		Message string `json:"message"`
		Times   int    `json:"times"`
		Hang    bool   `json:"hang,omitempty"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	hangs, hostOp := hostFaultOps[req.Op]
	if !hostOp {
		hangs = vmFaultOps[req.Op]
	}
	switch {
	case !hostOp && !vmFaultOps[req.Op]:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "op must be one of install, reboot, reboot_hang, " +
			"update_graphics, update_module_options, nvidia_smi, enter_maintenance, exit_maintenance (with host) or power_on, power_off (with vm)"})
		return
	case hostOp && (req.Host == "" || req.VM != ""), !hostOp && (req.VM == "" || req.Host != ""):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "op " + req.Op + " takes " + map[bool]string{true: "host", false: "vm"}[hostOp] + " (and not the other)"})
		return
	case req.Hang && !hangs:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "hang applies to the task ops install, reboot, enter_maintenance, exit_maintenance, power_on and power_off"})
		return
	}
	key := req.Host + "/" + req.Op
	if hostOp {
		sim.mu.Lock()
		_, ok := sim.hosts[req.Host]
		sim.mu.Unlock()
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown host " + req.Host})
			return
		}
	} else {
		if !vmExists(f.reg, req.VM) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown VM " + req.VM})
			return
		}
		key = "vm:" + req.VM + "/" + req.Op
	}
	if req.Times <= 0 {
		req.Times = 1
	}
	if req.Message == "" && !req.Hang {
		req.Message = "injected fault: " + req.Op
	}
	sim.mu.Lock()
	sim.faults[key] = &injectedFault{Message: req.Message, Times: req.Times, Hang: req.Hang}
	sim.mu.Unlock()
	writeJSON(w, http.StatusOK, req)
}

func vmExists(reg *simulator.Registry, name string) bool {
	for _, e := range reg.All("VirtualMachine") {
		if vm, ok := e.(*simulator.VirtualMachine); ok && vm.Name == name {
			return true
		}
	}
	return false
}

func copyMap(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (f *front) hostAdmin(w http.ResponseWriter, r *http.Request, rest string) {
	name, action, _ := strings.Cut(rest, "/")
	sim.mu.Lock()
	g, ok := sim.hosts[name]
	sim.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown host " + name})
		return
	}
	ctx := &simulator.Context{Context: context.Background(), Map: f.reg}
	switch {
	case action == "" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, hostView(ctx, g))
	case action == "driver" && r.Method == http.MethodPost:
		var req struct {
			Version string `json:"version"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		sim.mu.Lock()
		if g.spec.Model == nil && req.Version != "" {
			sim.mu.Unlock()
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "host " + name + " has no GPU"})
			return
		}
		// Drift: the driver on disk and in the kernel changes behind vCenter's back.
		g.installed, g.running, g.rebootRequired = req.Version, req.Version, false
		sim.mu.Unlock()
		sim.render(ctx, g)
		writeJSON(w, http.StatusOK, hostView(ctx, g))
	case strings.HasPrefix(action, "gpus/") && r.Method == http.MethodPost:
		setGPUAdmin(w, r, ctx, g, strings.TrimPrefix(action, "gpus/"))
	case action == "mig" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"gpus": migView(g)})
	case action == "reconnect" && r.Method == http.MethodPost:
		// A host held down by reboot_hang comes back (new boot time, staged driver running).
		if !sim.reconnectHung(g) {
			writeJSON(w, http.StatusConflict, map[string]string{"error": "host " + name + " is not waiting to reconnect after a reboot (no reboot_hang)"})
			return
		}
		writeJSON(w, http.StatusOK, hostView(ctx, g))
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such admin endpoint: " + r.Method + " " + r.URL.Path})
	}
}

// hostView is the JSON form of GET /_sim/hosts/<name>.
func hostView(ctx *simulator.Context, g *gpuHost) map[string]any {
	host := ctx.Map.Get(g.ref).(*simulator.HostSystem)
	var maint bool
	var conn types.HostSystemConnectionState
	var boot string
	ctx.WithLock(host, func() {
		maint = host.Runtime.InMaintenanceMode
		conn = host.Runtime.ConnectionState
		if host.Runtime.BootTime != nil {
			boot = host.Runtime.BootTime.UTC().Format("2006-01-02T15:04:05.000Z")
		}
	})
	sim.mu.Lock()
	defer sim.mu.Unlock()
	model, gpus := "", 0
	if g.spec.Model != nil {
		model, gpus = g.spec.Model.Name, g.spec.GPUCount
	}
	devices := map[string]string{}
	for _, id := range g.gpuPciIDs() {
		devices[id] = g.deviceGraphicsType(id)
	}
	return map[string]any{
		"name":             g.spec.Name,
		"moid":             g.ref.Value,
		"cluster":          g.spec.Cluster,
		"gpu_model":        model,
		"gpu_count":        gpus,
		"driver_installed": g.installed,
		"driver_running":   g.running,
		"reboot_required":  g.rebootRequired,
		"reboot_count":     g.rebootCount,
		"boot_time":        boot,
		"graphics": map[string]any{
			"default": g.graphics.HostDefaultGraphicsType,
			"policy":  g.graphics.SharedPassthruAssignmentPolicy,
			"devices": devices,
		},
		"nvidia_options":        g.nvidiaOptions,
		"nvidia_options_loaded": g.nvidiaOptionsLoaded,
		"rebooting":             g.rebooting,
		"reboot_hung":           g.hung,
		"maintenance":           maint,
		"connection_state":      string(conn),
		"vgpu_profiles":         len(g.offered()),
		"gpus":                  g.gpusView(),
		"ssh_service":           map[bool]string{true: "running", false: "stopped"}[g.sshRunning],
		"lockdown":              string(g.lockdown),
	}
}
