package main

// The per-Supervisor Automation API and what vCenter 9.1 deprecates, after VMware's published
// 9.1.1.0 bindings (vmware-vcenter, com/vmware/vcenter/namespace_management/supervisors_client.py
// and namespace_management_client.py):
//
//   - GET /api/vcenter/namespace-management/supervisors/summaries: Summary.list, a ListResult
//     {items: [{supervisor, info}]}; GET .../supervisors/{supervisor}/summary: Summary.get, an Info
//     {name, stats, config_status, kubernetes_status} (+ messages from API 9.1.0.0).
//   - GET .../supervisors/{supervisor}/topology: Topology.get, [{zone, clusters: [cluster ids]}].
//   Summary and Topology came with API 8.0.0.1, so every presentation serves them. A Supervisor's
//   id is its cluster's moid here (namespace_ext.go keys the v2 namespace create the same way); its
//   name is the cluster's name, its one zone "zone-<cluster name>".
//
//   - Deprecated calls: Clusters.list (GET /api/vcenter/namespace-management/clusters) is deprecated
//     as of API 9.1.0.0 in favour of Summary.list with Topology.get, and Clusters.get with it for the
//     Supervisor settings; NamespaceSelfService and NamespaceTemplates as of 9.1.0.0 ("use VCF
//     Automation"). The bindings keep every one of these operations with its REST metadata: a
//     9.1.1.0 client warns (DeprecationWarning) and still sends the call, and no operation is marked
//     removed. So a 9.1 vCenter still serves them, and so does the simulator; it counts each such
//     call a client sends to a 9.1 presentation ("deprecated" in GET /_sim/stats) so a test can show
//     the collection sends none.

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
)

const supervisorsPath = "/api/vcenter/namespace-management/supervisors"

// deprecatedCalls are the calls the bindings mark ".. deprecated::" (method, path or path prefix
// ending in "/", the ?action= value where the operation has one, the first API that deprecates it).
var deprecatedCalls = []struct {
	method, path, action, since string
}{
	{http.MethodGet, "/api/vcenter/namespace-management/clusters", "", "9.1.0.0"},                  // Clusters.list
	{http.MethodPost, "/api/vcenter/namespace-management/clusters/", "enable", "9.0.0.0"},          // Clusters.enable
	{http.MethodPost, "/api/vcenter/namespace-management/clusters/", "disable", "9.1.0.0"},         // Clusters.disable
	{http.MethodPost, "/api/vcenter/namespace-management/clusters/", "rotate_password", "9.1.0.0"}, // Clusters.rotate_password
	{"*", "/api/vcenter/namespaces/namespace-self-service", "", "9.1.0.0"},                         // NamespaceSelfService
	{"*", "/api/vcenter/namespaces/namespace-self-service/", "", "9.1.0.0"},                        // NamespaceSelfService
	{"*", "/api/vcenter/namespaces/namespace-templates/", "", "9.1.0.0"},                           // NamespaceTemplates
}

var deprecatedSeen = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

// countDeprecated counts a client call the presented release marks deprecated.
func countDeprecated(r *http.Request) {
	for _, d := range deprecatedCalls {
		if d.method != "*" && d.method != r.Method || !apiAtLeast(presented.API, d.since) {
			continue
		}
		prefix := strings.HasSuffix(d.path, "/")
		if prefix && !strings.HasPrefix(r.URL.Path, d.path) || !prefix && r.URL.Path != d.path {
			continue
		}
		if d.action != "" && r.URL.Query().Get("action") != d.action {
			continue
		}
		deprecatedSeen.Lock()
		deprecatedSeen.n[r.Method+" "+r.URL.Path]++
		deprecatedSeen.Unlock()
		return
	}
}

func deprecatedStats() map[string]int {
	deprecatedSeen.Lock()
	defer deprecatedSeen.Unlock()
	out := make(map[string]int, len(deprecatedSeen.n))
	for k, v := range deprecatedSeen.n {
		out[k] = v
	}
	return out
}

func resetDeprecatedStats() {
	deprecatedSeen.Lock()
	deprecatedSeen.n = map[string]int{}
	deprecatedSeen.Unlock()
}

// apiAtLeast compares two dotted API versions part by part ("9.1.0.0" >= "9.1.0.0").
func apiAtLeast(have, want string) bool {
	h, w := strings.Split(have, "."), strings.Split(want, ".")
	for i := 0; i < len(w); i++ {
		var a, b int
		if i < len(h) {
			a = atoiOr0(h[i])
		}
		b = atoiOr0(w[i])
		if a != b {
			return a > b
		}
	}
	return true
}

func atoiOr0(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// supervisorNames is {moid: cluster name} of the Supervisor-enabled clusters, sorted by name.
func supervisorNames() ([]string, map[string]string) {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	names := map[string]string{}
	ids := []string{}
	for n, ref := range sim.clusters {
		if sim.supervisors[ref.Value] {
			names[ref.Value] = n
			ids = append(ids, ref.Value)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return names[ids[i]] < names[ids[j]] })
	return ids, names
}

// summaryInfo is a Summary.Info of one Supervisor.
func (f *front) summaryInfo(id, name string) map[string]any {
	info := map[string]any{"name": name, "stats": f.clusterStats(id), "config_status": "RUNNING", "kubernetes_status": "READY"}
	if apiAtLeast(presented.API, "9.1.0.0") {
		info["messages"] = []any{}
	}
	return info
}

// serveSupervisors answers the Summary and Topology calls (true when it did). The request goes
// through vcsim's session check first, as every call does.
func (f *front) serveSupervisors(w http.ResponseWriter, r *http.Request) bool {
	p := strings.TrimSuffix(r.URL.Path, "/")
	if p != supervisorsPath+"/summaries" && !strings.HasPrefix(p, supervisorsPath+"/") {
		return false
	}
	route := strings.Split(strings.TrimPrefix(p, supervisorsPath+"/"), "/")
	known := (len(route) == 1 && route[0] == "summaries") || (len(route) == 2 && (route[1] == "summary" || route[1] == "topology"))
	if !known {
		return false // other per-Supervisor calls are served elsewhere (or not at all)
	}
	probe := httptest.NewRecorder()
	req, _ := http.NewRequest(http.MethodGet, legacySessionPath, nil)
	req.Header = r.Header.Clone()
	req.Host = r.Host
	f.next.ServeHTTP(probe, req)
	if probe.Code != http.StatusOK {
		apiError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Authentication required.")
		return true
	}
	if r.Method != http.MethodGet {
		notAllowed(w)
		return true
	}
	ids, names := supervisorNames()
	if route[0] == "summaries" {
		items := make([]map[string]any, 0, len(ids))
		for _, id := range ids {
			items = append(items, map[string]any{"supervisor": id, "info": f.summaryInfo(id, names[id])})
		}
		writeJSON(w, http.StatusOK, map[string]any{"items": items})
		return true
	}
	id := route[0]
	name, ok := names[id]
	if !ok {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "Supervisor %s not found", id)
		return true
	}
	if route[1] == "summary" {
		writeJSON(w, http.StatusOK, f.summaryInfo(id, name))
		return true
	}
	writeJSON(w, http.StatusOK, []map[string]any{{"zone": "zone-" + name, "clusters": []string{id}}})
	return true
}
