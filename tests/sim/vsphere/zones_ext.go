package main

// Reserved VM classes, vSphere API 9.0.0.0, after VMware's published 9.1.1.0 bindings
// (vmware-vcenter: com/vmware/vcenter/namespace_management/supervisors/zones_client.py,
// namespaces_client.py, namespaces/instances_client.py):
//
//   - Supervisor zone bindings (Bindings): GET|POST .../supervisors/{supervisor}/zones/bindings
//     (list: a ListResult {zones: [Info]}; create: a CreateSpec {specs: [ZoneSpec{zone, type,
//     resource_allocation{vm_reservations[{reserved_vm_class, count}]}}]}), PATCH|PUT|DELETE
//     .../supervisors/{supervisor}/zones/{zone}/bindings (UpdateSpec and SetSpec
//     {resource_allocation}). Info.resource_allocation.vm_reservations[] carries, from API
//     9.1.0.0, cluster_allocation {cluster: {reserved, used}}.
//   - Namespace zones: zones[] (Instances.ZoneSpec {name, vm_reservations,
//     disallow_unreserved_direct_path_usage, cpu/memory limits and reservations}) on the v2 create
//     (CreateSpecV2) and the update (UpdateSpec: "if None, the existing vSphere Zones on the namespace
//     will not be modified"; a listed zone is added or set, one not listed stays: removal is its own
//     call, DELETE /api/vcenter/namespaces/instances/{namespace}/zones/{zone}); read back by GET
//     /api/vcenter/namespaces/instances/v2/{namespace} (InfoV2.zones: ZoneInfo {zone, type,
//     marked_for_removal}: the bindings give no read of a namespace zone's reservations).
//
// Served on 9.0 and 9.1 presentations only; on 8.x every one of these paths is answered as vCenter
// answers a path it does not serve (404 NOT_FOUND), and a zones[] on a namespace create or update is
// refused (an 8.0 U3 UpdateSpec has no such field).
//
// The zones of this vCenter: one per cluster, "zone-<cluster name>", holding that cluster's hosts
// (supervisors.go's Topology gives a Supervisor its cluster's zone). A Supervisor starts bound to its
// own zone (type WORKLOAD, nothing reserved). What is refused (400 or 404 with the error the
// operation declares):
//   - a zone that is not one of this vCenter's (NOT_FOUND), a zone bound twice (create:
//     NOT_ALLOWED_IN_CURRENT_STATE), a binding that does not exist (NOT_FOUND);
//   - a reserved_vm_class that is not a VM class of this vCenter (NOT_FOUND), a negative count;
//   - a count the zone's hosts cannot hold (NOT_ALLOWED_IN_CURRENT_STATE). This is our model, not a
//     documented vCenter rule: per vGPU profile, the reservations' vGPUs (count x the class's devices
//     of that profile, summed over the zone's classes) must not exceed the zone's cards' maximum of that
//     profile (the figure DirectPathProfileManager.QueryCapacity gives as max, dpprofile_ext.go);
//     profiles are counted apart, so two profiles sharing a card are not checked together;
//   - on the namespace side (our model too): a zone the namespace's Supervisor does not bind, and
//     reservations of a class in a zone beyond what the Supervisor's binding reserves of it, summed
//     over the namespaces (INVALID_ARGUMENT).
// A zone delete on a namespace removes it at once (no workload of the simulator runs in it, so there is
// nothing to drain).

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// zoneBinding is one zone bound to a Supervisor: its type and {reserved class: count}.
type zoneBinding struct {
	Type         string
	Reservations map[string]int
}

var zoneState = struct {
	sync.Mutex
	bindings map[string]map[string]*zoneBinding // supervisor -> zone -> binding
}{bindings: map[string]map[string]*zoneBinding{}}

// theRestExt is the REST extension (namespace_ext.go) whose VM classes and namespaces the zones see.
var theRestExt *restExt

func zonesServed() bool { return apiAtLeast(presented.API, "9.0.0.0") }

// zoneCluster is the cluster name of a zone of this vCenter ("" when it is none).
func zoneCluster(zone string) string {
	name, ok := strings.CutPrefix(zone, "zone-")
	if !ok {
		return ""
	}
	sim.mu.Lock()
	defer sim.mu.Unlock()
	if _, ok := sim.clusters[name]; ok {
		return name
	}
	return ""
}

// bindingsOf are a Supervisor's bindings, its own zone bound on first use. Call with zoneState held.
func bindingsOf(supervisor, clusterName string) map[string]*zoneBinding {
	b, ok := zoneState.bindings[supervisor]
	if !ok {
		b = map[string]*zoneBinding{"zone-" + clusterName: {Type: "WORKLOAD", Reservations: map[string]int{}}}
		zoneState.bindings[supervisor] = b
	}
	return b
}

// classProfiles are the vGPU profiles of a VM class, one per device (both API forms).
func classProfiles(c map[string]any) []string {
	var out []string
	if d, ok := c["devices"].(map[string]any); ok {
		for _, v := range asList(d["vgpu_devices"]) {
			if m, ok := v.(map[string]any); ok {
				if p, _ := m["profile_name"].(string); p != "" {
					out = append(out, p)
				}
			}
		}
	}
	if cs, ok := c["config_spec"].(map[string]any); ok {
		for _, ch := range asList(cs["deviceChange"]) {
			m, _ := ch.(map[string]any)
			dev, _ := m["device"].(map[string]any)
			backing, _ := dev["backing"].(map[string]any)
			if p, _ := backing["vgpu"].(string); p != "" && backing["_typeName"] == "VirtualPCIPassthroughVmiopBackingInfo" {
				out = append(out, p)
			}
		}
	}
	return out
}

// zoneMax is the most vGPUs of profile p the cards of a cluster's hosts hold with nothing placed.
func zoneMax(clusterName, profile string) int {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	total := 0
	for _, g := range sim.hosts {
		if g.spec.Cluster != clusterName || g.spec.Model == nil {
			continue
		}
		p, ok := g.profile(profile)
		if !ok {
			continue
		}
		for i := 0; i < g.spec.GPUCount; i++ {
			max, _, _ := g.gpuCapacity(i, p)
			total += max
		}
	}
	return total
}

// readReservations (call with e.mu held) checks a vm_reservations list: [{reserved_vm_class, count}] of known classes.
// It returns the counts, or the HTTP status, error type and message of the refusal.
func readReservations(e *restExt, v any, where string) (map[string]int, int, string, string) {
	out := map[string]int{}
	if v == nil {
		return out, 0, "", ""
	}
	list, ok := v.([]any)
	if !ok {
		return nil, http.StatusBadRequest, "INVALID_ARGUMENT", where + ".vm_reservations must be a list"
	}
	for i, item := range list {
		m, _ := item.(map[string]any)
		class, _ := m["reserved_vm_class"].(string)
		count, isNum := num(m["count"])
		if class == "" || !isNum || count < 0 {
			return nil, http.StatusBadRequest, "INVALID_ARGUMENT",
				fmt.Sprintf("%s.vm_reservations[%d] needs a reserved_vm_class and a count of 0 or more", where, i)
		}
		if _, known := e.classes[class]; !known {
			return nil, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("%s: VM class %s not found", where, class)
		}
		out[class] += int(count)
	}
	return out, 0, "", ""
}

// overCapacity (call with e.mu held) says which profile a zone's reservations overrun, "" when they fit.
func overCapacity(e *restExt, zone string, counts map[string]int) string {
	cluster := zoneCluster(zone)
	need := map[string]int{}
	for class, n := range counts {
		for _, p := range classProfiles(e.classes[class]) {
			need[p] += n
		}
	}
	for _, p := range sortedKeys(need) {
		if have := zoneMax(cluster, p); need[p] > have {
			return fmt.Sprintf("zone %s cannot hold the reservations: they need %d vGPUs of profile %s, the cards of "+
				"its hosts hold at most %d", zone, need[p], p, have)
		}
	}
	return ""
}

func reservationList(counts map[string]int, withClusters bool, clusterID string) []map[string]any {
	out := []map[string]any{}
	for _, class := range sortedKeys(counts) {
		item := map[string]any{"reserved_vm_class": class, "count": counts[class]}
		if withClusters && clusterID != "" {
			// used: no VM Service VM runs in the simulator
			item["cluster_allocation"] = map[string]any{clusterID: map[string]any{"reserved": counts[class], "used": 0}}
		}
		out = append(out, item)
	}
	return out
}

// bindingInfo is a Bindings.Info.
func bindingInfo(zone string, b *zoneBinding, namespaces []string) map[string]any {
	clusterID := ""
	if name := zoneCluster(zone); name != "" {
		sim.mu.Lock()
		clusterID = sim.clusters[name].Value
		sim.mu.Unlock()
	}
	return map[string]any{
		"zone": zone, "type": b.Type, "namespaces": namespaces, "marked_for_removal": false, "status": "READY",
		"messages": []any{},
		"resource_allocation": map[string]any{
			"vm_reservations": reservationList(b.Reservations, apiAtLeast(presented.API, "9.1.0.0"), clusterID)},
	}
}

// serveZoneBindings answers the Bindings calls (true when it did).
func (f *front) serveZoneBindings(w http.ResponseWriter, r *http.Request) bool {
	p := strings.TrimSuffix(r.URL.Path, "/")
	if !strings.HasPrefix(p, supervisorsPath+"/") {
		return false
	}
	route := strings.Split(strings.TrimPrefix(p, supervisorsPath+"/"), "/")
	list := len(route) == 3 && route[1] == "zones" && route[2] == "bindings"
	one := len(route) == 4 && route[1] == "zones" && route[3] == "bindings"
	if !list && !one {
		return false
	}
	if rec := theRestExt.inner(r, http.MethodGet, legacySessionPath, nil); rec.Code != http.StatusOK {
		apiError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Authentication required.")
		return true
	}
	if !zonesServed() {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "no operation %s %s at vSphere API %s", r.Method, r.URL.Path, presented.API)
		return true
	}
	_, names := supervisorNames()
	supervisor := route[0]
	clusterName, ok := names[supervisor]
	if !ok {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "Supervisor %s not found", supervisor)
		return true
	}
	e := theRestExt // lock order: e.mu, zoneState, sim.mu
	e.mu.Lock()
	defer e.mu.Unlock()
	zoneState.Lock()
	defer zoneState.Unlock()
	bindings := bindingsOf(supervisor, clusterName)
	switch {
	case list && r.Method == http.MethodGet:
		zones := []map[string]any{}
		for _, zone := range sortedKeys(bindings) {
			zones = append(zones, bindingInfo(zone, bindings[zone], e.namespacesInZone(zone)))
		}
		writeJSON(w, http.StatusOK, map[string]any{"zones": zones})
	case list && r.Method == http.MethodPost:
		spec, ok := readSpec(w, r)
		if !ok {
			return true
		}
		specs, _ := spec["specs"].([]any)
		made := map[string]*zoneBinding{}
		for i, s := range specs {
			m, _ := s.(map[string]any)
			zone, _ := m["zone"].(string)
			where := fmt.Sprintf("specs[%d]", i)
			if zoneCluster(zone) == "" {
				apiError(w, http.StatusNotFound, "NOT_FOUND", "%s: zone %q not found", where, zone)
				return true
			}
			if _, taken := bindings[zone]; taken || made[zone] != nil {
				apiError(w, http.StatusBadRequest, "NOT_ALLOWED_IN_CURRENT_STATE", "%s: zone %s is already bound to Supervisor %s", where, zone, supervisor)
				return true
			}
			kind, _ := m["type"].(string)
			if kind == "" {
				kind = "WORKLOAD"
			}
			if kind != "WORKLOAD" && kind != "MANAGEMENT" {
				apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "%s.type %q is not MANAGEMENT or WORKLOAD", where, kind)
				return true
			}
			alloc, _ := m["resource_allocation"].(map[string]any)
			counts, code, kindErr, msg := readReservations(e, alloc["vm_reservations"], where+".resource_allocation")
			if code != 0 {
				apiError(w, code, kindErr, "%s", msg)
				return true
			}
			if msg := overCapacity(e, zone, counts); msg != "" {
				apiError(w, http.StatusBadRequest, "NOT_ALLOWED_IN_CURRENT_STATE", "%s", msg)
				return true
			}
			made[zone] = &zoneBinding{Type: kind, Reservations: counts}
		}
		for zone, b := range made {
			bindings[zone] = b
		}
		w.WriteHeader(http.StatusNoContent)
	case one:
		zone := route[2]
		b, bound := bindings[zone]
		if !bound {
			apiError(w, http.StatusNotFound, "NOT_FOUND", "zone %s is not bound to Supervisor %s", zone, supervisor)
			return true
		}
		switch r.Method {
		case http.MethodPatch, http.MethodPut:
			spec, ok := readSpec(w, r)
			if !ok {
				return true
			}
			alloc, given := spec["resource_allocation"].(map[string]any)
			if !given {
				if r.Method == http.MethodPatch {
					w.WriteHeader(http.StatusNoContent) // nothing to update
					return true
				}
				alloc = map[string]any{} // set: an unset allocation reserves nothing
			}
			counts, code, kindErr, msg := readReservations(e, alloc["vm_reservations"], "resource_allocation")
			if code != 0 {
				apiError(w, code, kindErr, "%s", msg)
				return true
			}
			if msg := overCapacity(e, zone, counts); msg != "" {
				apiError(w, http.StatusBadRequest, "NOT_ALLOWED_IN_CURRENT_STATE", "%s", msg)
				return true
			}
			b.Reservations = counts
			w.WriteHeader(http.StatusNoContent)
		case http.MethodDelete:
			if len(e.namespacesInZone(zone)) > 0 {
				apiError(w, http.StatusBadRequest, "NOT_ALLOWED_IN_CURRENT_STATE", "zone %s still has namespaces", zone)
				return true
			}
			delete(bindings, zone)
			w.WriteHeader(http.StatusNoContent)
		default:
			notAllowed(w)
		}
	default:
		notAllowed(w)
	}
	return true
}

// namespacesInZone are the namespaces with a zone, sorted (call with e.mu held).
func (e *restExt) namespacesInZone(zone string) []string {
	out := []string{}
	for _, name := range sortedKeys(e.namespaces) {
		if _, ok := nsZones(e.namespaces[name])[zone]; ok {
			out = append(out, name)
		}
	}
	return out
}

// nsZone is what a namespace keeps of one zone's ZoneSpec.
type nsZone struct {
	Reservations map[string]int
	Spec         map[string]any
}

func nsZones(ns map[string]any) map[string]*nsZone {
	z, _ := ns["zones"].(map[string]*nsZone)
	if z == nil {
		return map[string]*nsZone{}
	}
	return z
}

// applyZones checks the zones[] of a namespace create or update (call with e.mu held) and returns
// the namespace's zones after it, or the refusal.
func (e *restExt) applyZones(name, supervisor string, current map[string]*nsZone, v any) (map[string]*nsZone, string) {
	if !zonesServed() {
		return nil, fmt.Sprintf("zones: no such field at vSphere API %s", presented.API)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, "zones must be a list of ZoneSpec"
	}
	next := map[string]*nsZone{}
	for k, z := range current {
		next[k] = z
	}
	zoneState.Lock()
	bound := map[string]*zoneBinding{}
	if b := zoneState.bindings[supervisor]; b != nil {
		bound = b
	} else if _, names := supervisorNames(); names[supervisor] != "" {
		bound = bindingsOf(supervisor, names[supervisor])
	}
	zoneState.Unlock()
	for i, item := range list {
		m, _ := item.(map[string]any)
		zone, _ := m["name"].(string)
		where := fmt.Sprintf("zones[%d]", i)
		if _, ok := bound[zone]; !ok {
			return nil, fmt.Sprintf("%s: zone %q is not bound to Supervisor %s", where, zone, supervisor)
		}
		counts := map[string]int{}
		for j, r := range asList(m["vm_reservations"]) {
			rm, _ := r.(map[string]any)
			class, _ := rm["reserved_vm_class"].(string)
			count, isNum := num(rm["count"])
			if _, known := e.classes[class]; !known {
				return nil, fmt.Sprintf("%s.vm_reservations[%d]: VM class %q not found", where, j, class)
			}
			if !isNum || count < 0 {
				return nil, fmt.Sprintf("%s.vm_reservations[%d]: count must be 0 or more", where, j)
			}
			counts[class] += int(count)
		}
		next[zone] = &nsZone{Reservations: counts, Spec: m}
	}
	// the namespaces' reservations of a class in a zone within the Supervisor's (our model)
	for zone, z := range next {
		for _, class := range sortedKeys(z.Reservations) {
			total := z.Reservations[class]
			for other, ns := range e.namespaces {
				if other == name {
					continue
				}
				if oz, ok := nsZones(ns)[zone]; ok {
					total += oz.Reservations[class]
				}
			}
			if held := bound[zone].Reservations[class]; total > held {
				return nil, fmt.Sprintf("zone %s: the namespaces would reserve %d VMs of class %s, the Supervisor's "+
					"binding reserves %d", zone, total, class, held)
			}
		}
	}
	return next, ""
}

// zoneInfos are a namespace's InfoV2.zones.
func zoneInfos(ns map[string]any) []map[string]any {
	out := []map[string]any{}
	zones := nsZones(ns)
	for _, zone := range sortedKeys(zones) {
		out = append(out, map[string]any{"zone": zone, "type": "WORKLOAD", "marked_for_removal": false})
	}
	return out
}

// zonesStats is the "zones" part of GET /_sim/stats: each Supervisor's bindings and each namespace's
// zones with their reservations (what a test cannot read through the API: the namespace side).
func zonesStats() map[string]any {
	bindings := map[string]any{}
	zoneState.Lock()
	for sup, zones := range zoneState.bindings {
		m := map[string]any{}
		for zone, b := range zones {
			m[zone] = b.Reservations
		}
		bindings[sup] = m
	}
	zoneState.Unlock()
	namespaces := map[string]any{}
	if e := theRestExt; e != nil {
		e.mu.Lock()
		for name, ns := range e.namespaces {
			zones := nsZones(ns)
			if len(zones) == 0 {
				continue
			}
			m := map[string]any{}
			for zone, z := range zones {
				flag, _ := z.Spec["disallow_unreserved_direct_path_usage"].(bool)
				m[zone] = map[string]any{"vm_reservations": z.Reservations, "disallow_unreserved_direct_path_usage": flag}
			}
			namespaces[name] = m
		}
		e.mu.Unlock()
	}
	return map[string]any{"bindings": bindings, "namespaces": namespaces}
}

// namespaceV2 answers GET /api/vcenter/namespaces/instances/v2/{namespace} (Instances.get_v2, API
// 8.0.0.1) with an InfoV2; zones from API 9.0.0.0. Call with e.mu held.
func (e *restExt) namespaceV2(w http.ResponseWriter, name string) {
	ns, ok := e.namespaces[name]
	if !ok {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "namespace %s not found", name)
		return
	}
	info := map[string]any{"supervisor": ns["cluster"], "config_status": "RUNNING", "messages": []any{},
		"self_service_namespace": false, "stats": namespaceStats()}
	for _, k := range nsFields {
		if v, ok := ns[k]; ok {
			info[k] = v
		}
	}
	if zonesServed() {
		info["zones"] = zoneInfos(ns)
	}
	writeJSON(w, http.StatusOK, info)
}

// deleteZone answers DELETE /api/vcenter/namespaces/instances/{namespace}/zones/{zone}. Call with e.mu held.
func (e *restExt) deleteZone(w http.ResponseWriter, r *http.Request, ns map[string]any, zone string) {
	if r.Method != http.MethodDelete {
		notAllowed(w)
		return
	}
	zones := nsZones(ns)
	if _, ok := zones[zone]; !ok {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "zone %s is not a zone of the namespace", zone)
		return
	}
	next := map[string]*nsZone{}
	for k, z := range zones {
		if k != zone {
			next[k] = z
		}
	}
	ns["zones"] = next
	w.WriteHeader(http.StatusNoContent)
}
