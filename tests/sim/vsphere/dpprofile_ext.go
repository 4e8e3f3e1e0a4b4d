package main

// vCenter's own vGPU capacity figures, vSphere API 9.0: ServiceContent.directPathProfileManager and its
// DirectPathProfileManagerQueryCapacity(target, querySpec[]) (pyVmomi 9.1.1.0 type tables:
// vim.DirectPathProfileManager.queryDirectPathProfileCapacity, wire name
// DirectPathProfileManagerQueryCapacity; govmomi's vim25 types carry the same classes, its simulator
// does not serve them). govmomi's doc of DirectPathProfileManagerCapacityInfo gives the fields:
// consumed (units assigned to powered-on VMs of the target), remaining (units not assigned and not
// reserved), max (the capacity with no VM running) and unusedReservation (reserved, not assigned),
// with max >= consumed + remaining + unusedReservation. The rules (README.md, "vCenter's vGPU capacity"):
//
//   - served only when the simulator presents API 9.0 or later: the ServiceContent then names the
//     manager; on 8.0.3 it names none, as a vCenter without the method;
//   - target: DirectPathProfileManagerTargetCluster (the cluster's hosts) or ...TargetHost; a missing
//     target, or one that names no cluster or host of the inventory, is refused with InvalidArgument;
//   - querySpec: one result per spec, in order. CapacityQueryByDeviceConfig with a
//     VmiopDirectPathConfig{vgpuProfile} is answered from the placement state (placement.go): only the
//     target's hosts that are connected, out of maintenance mode and offer the profile (a loaded
//     driver) count; per GPU, max is how many vGPUs of the profile its current MIG mode and vGPU mode
//     take with nothing placed (time-sliced: frame buffer / profile size, one profile per GPU in
//     sameSize mode; MIG mode: only MIG-backed profiles, as many GPU instances as the MIG geometry
//     places), consumed the profile's vGPUs placed on it, remaining how many more gpuHost.fits admits
//     next to what is placed - the same predicate a power-on obeys;
//   - a profile that none of the target's hosts offers, a query by id or name (the simulator keeps no
//     DirectPath profiles: Create, List, Update and Delete are not served) and any other device
//     config answer DirectPathProfileManagerCapacityUnknown with the spec and a NotFound fault;
//   - reservations: none unless a test sets them (POST /_sim/capacity/reservations {cluster, profile,
//     count}); a cluster's reserved units of a profile take from remaining and show as
//     unusedReservation (the reserved VM classes of a Supervisor zone are not turned into them).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// directPathVendor is DirectPathProfileInfo.vendorName of an NVIDIA vGPU profile.
const directPathVendor = "NVIDIA Corporation"

// DirectPathProfileManager serves QueryCapacity.
type DirectPathProfileManager struct {
	Self types.ManagedObjectReference
}

func (m *DirectPathProfileManager) Reference() types.ManagedObjectReference { return m.Self }

// capacityReservations: cluster name -> vGPU profile -> reserved units (set by tests).
var capacityReservations = struct {
	sync.Mutex
	n map[string]map[string]int
}{n: map[string]map[string]int{}}

func init() {
	simulator.RegisterEndpoint(func(_ *simulator.Service, r *simulator.Registry) {
		if !r.IsVPX() || !apiAtLeast(presented.API, "9.0.0.0") {
			return
		}
		si, ok := r.Get(vim25.ServiceInstance).(*simulator.ServiceInstance)
		if !ok {
			return
		}
		mgr := &DirectPathProfileManager{Self: types.ManagedObjectReference{Type: "DirectPathProfileManager", Value: "DirectPathProfileManager"}}
		r.Put(mgr)
		ref := mgr.Self
		si.Content.DirectPathProfileManager = &ref
	})
}

// capacityHosts are the GPU hosts of a target: a cluster's hosts or one host; the cluster name ("" for a
// host target) and an error for a target the inventory does not hold.
func capacityHosts(ctx *simulator.Context, target types.BaseDirectPathProfileManagerTargetEntity) ([]*gpuHost, string, error) {
	switch t := target.(type) {
	case *types.DirectPathProfileManagerTargetCluster:
		cl, ok := ctx.Map.Get(t.Cluster).(*simulator.ClusterComputeResource)
		if !ok {
			return nil, "", fmt.Errorf("target cluster %s is not a cluster of this vCenter", t.Cluster.Value)
		}
		var refs []types.ManagedObjectReference
		name := ""
		ctx.WithLock(cl, func() {
			refs = append(refs, cl.Host...)
			name = cl.Name
		})
		var out []*gpuHost
		sim.mu.Lock()
		for _, ref := range refs {
			if g := sim.hostOf(ref); g != nil {
				out = append(out, g)
			}
		}
		sim.mu.Unlock()
		return out, name, nil
	case *types.DirectPathProfileManagerTargetHost:
		sim.mu.Lock()
		g := sim.hostOf(t.Host)
		sim.mu.Unlock()
		if g == nil {
			if _, ok := ctx.Map.Get(t.Host).(*simulator.HostSystem); !ok {
				return nil, "", fmt.Errorf("target host %s is not a host of this vCenter", t.Host.Value)
			}
			return nil, "", nil // a host without GPUs
		}
		return []*gpuHost{g}, "", nil
	}
	return nil, "", fmt.Errorf("a target (DirectPathProfileManagerTargetCluster or DirectPathProfileManagerTargetHost) is required")
}

// hostCounts: whether a host's capacity counts (connected, not in maintenance mode).
func hostCounts(ctx *simulator.Context, g *gpuHost) bool {
	host, ok := ctx.Map.Get(g.ref).(*simulator.HostSystem)
	if !ok {
		return false
	}
	counts := false
	ctx.WithLock(host, func() {
		counts = host.Runtime.ConnectionState == types.HostSystemConnectionStateConnected && !host.Runtime.InMaintenanceMode
	})
	return counts
}

// maxCapacityUnits bounds the count of one profile on one GPU (a 1 GB profile on a 141 GB card is below it).
const maxCapacityUnits = 256

// gpuCapacity is (max, consumed, remaining) of profile p on GPU i. Call with sim.mu held.
func (g *gpuHost) gpuCapacity(i int, p vgpuProfile) (int, int, int) {
	g.ensureGPUState()
	consumed := 0
	for _, v := range g.placed[i] {
		if v.Profile.Name == p.Name {
			consumed++
		}
	}
	more := func() int {
		var extra []placedVGPU
		for len(extra) < maxCapacityUnits {
			if ok, _ := g.fits(i, p, extra); !ok {
				break
			}
			extra = append(extra, placedVGPU{Name: "(capacity)", Profile: p})
		}
		return len(extra)
	}
	remaining := more()
	// max: the same GPU, in its modes, with nothing placed (sim.mu is held: nobody sees the swap)
	held := g.placed[i]
	g.placed[i] = nil
	max := more()
	g.placed[i] = held
	return max, consumed, remaining
}

func capacityUnknown(spec types.BaseDirectPathProfileManagerCapacityQuerySpec, format string, args ...any) *types.DirectPathProfileManagerCapacityUnknown {
	msg := fmt.Sprintf(format, args...)
	return &types.DirectPathProfileManagerCapacityUnknown{
		QuerySpec: spec,
		FaultList: []types.LocalizedMethodFault{{Fault: simFault(&types.NotFound{}, "%s", msg), LocalizedMessage: msg}},
	}
}

// capacityOf answers one query spec for the target's hosts.
func capacityOf(ctx *simulator.Context, hosts []*gpuHost, cluster string, spec types.BaseDirectPathProfileManagerCapacityQuerySpec) types.BaseDirectPathProfileManagerCapacityResult {
	var name string
	switch s := spec.(type) {
	case *types.DirectPathProfileManagerCapacityQueryByDeviceConfig:
		vmiop, ok := s.DeviceConfig.(*types.DirectPathProfileManagerVmiopDirectPathConfig)
		if !ok || vmiop.VgpuProfile == "" {
			return capacityUnknown(spec, "only a VMIOP device config (a vGPU profile) has a capacity on this vCenter")
		}
		name = vmiop.VgpuProfile
	case *types.DirectPathProfileManagerCapacityQueryById:
		return capacityUnknown(spec, "DirectPath profile with id %q not found", s.Id)
	case *types.DirectPathProfileManagerCapacityQueryByName:
		return capacityUnknown(spec, "DirectPath profile %q not found", s.Name)
	default:
		return capacityUnknown(spec, "query spec %T is not a capacity query", spec)
	}
	counting := map[*gpuHost]bool{}
	for _, g := range hosts {
		counting[g] = hostCounts(ctx, g)
	}
	offered := false
	var max, consumed, remaining int
	sim.mu.Lock()
	for _, g := range hosts {
		p, ok := g.profile(name)
		if !ok {
			continue
		}
		offered = true
		if !counting[g] {
			continue
		}
		for i := 0; i < g.spec.GPUCount; i++ {
			a, b, c := g.gpuCapacity(i, p)
			max, consumed, remaining = max+a, consumed+b, remaining+c
		}
	}
	sim.mu.Unlock()
	if !offered {
		return capacityUnknown(spec, "vGPU profile %s is not offered by the hosts of the target", name)
	}
	reserved := 0
	if cluster != "" {
		capacityReservations.Lock()
		reserved = capacityReservations.n[cluster][name]
		capacityReservations.Unlock()
	}
	unused := reserved
	if unused > remaining {
		unused = remaining
	}
	return &types.DirectPathProfileManagerCapacityInfo{
		Profile: types.DirectPathProfileInfo{
			Id: "vmiop:" + name, Name: name, VendorName: directPathVendor,
			DeviceConfig: &types.DirectPathProfileManagerVmiopDirectPathConfig{VgpuProfile: name},
		},
		Consumed: int32(consumed), Remaining: int32(remaining - unused), Max: int32(max), UnusedReservation: int32(unused),
	}
}

func (m *DirectPathProfileManager) DirectPathProfileManagerQueryCapacity(ctx *simulator.Context, req *types.DirectPathProfileManagerQueryCapacity) soap.HasFault {
	body := new(methods.DirectPathProfileManagerQueryCapacityBody)
	hosts, cluster, err := capacityHosts(ctx, req.Target)
	if err != nil {
		body.Fault_ = simulator.Fault(err.Error(), simFault(&types.InvalidArgument{InvalidProperty: "target"}, "%v", err))
		return body
	}
	res := &types.DirectPathProfileManagerQueryCapacityResponse{}
	for _, spec := range req.QuerySpec {
		res.Returnval = append(res.Returnval, capacityOf(ctx, hosts, cluster, spec))
	}
	body.Res = res
	return body
}

// capacityAdmin serves POST /_sim/capacity/reservations {cluster, profile, count} (count 0 drops it)
// and GET /_sim/capacity/reservations; false for other paths.
func capacityAdmin(w http.ResponseWriter, r *http.Request, p string) bool {
	if p != "/_sim/capacity/reservations" {
		return false
	}
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		var req struct {
			Cluster string `json:"cluster"`
			Profile string `json:"profile"`
			Count   int    `json:"count"`
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.Cluster == "" || req.Profile == "" || req.Count < 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "give cluster, profile and a count of 0 or more"})
			return true
		}
		sim.mu.Lock()
		_, known := sim.clusters[req.Cluster]
		sim.mu.Unlock()
		if !known {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no cluster " + req.Cluster})
			return true
		}
		capacityReservations.Lock()
		if capacityReservations.n[req.Cluster] == nil {
			capacityReservations.n[req.Cluster] = map[string]int{}
		}
		if req.Count == 0 {
			delete(capacityReservations.n[req.Cluster], req.Profile)
		} else {
			capacityReservations.n[req.Cluster][req.Profile] = req.Count
		}
		capacityReservations.Unlock()
	default:
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "GET or POST"})
		return true
	}
	capacityReservations.Lock()
	out := map[string]map[string]int{}
	for c, m := range capacityReservations.n {
		out[c] = map[string]int{}
		for k, v := range m {
			out[c][k] = v
		}
	}
	capacityReservations.Unlock()
	writeJSON(w, http.StatusOK, out)
	return true
}
