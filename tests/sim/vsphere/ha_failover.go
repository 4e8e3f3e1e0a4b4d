package main

// vSphere HA in front of vcsim, which has none: a host failure (POST
// /_sim/hosts/<name>/fail) powers the host's VMs off and restarts them on the
// cluster's other hosts in restart-priority order where their vGPUs fit
// (placement.go), and admission control with the percentage-based policy
// refuses a PowerOnVM_Task that would reserve the failover capacity
// (InsufficientFailoverResourcesFault). README.md, "Host failure and HA
// admission control", gives the rules and their sources.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// What every host of the fleet presents for admission control: a GPU server's
// CPU cores and memory (vcsim's template host has 2 cores and 4 GB, less than
// one node VM reserves).
const (
	haHostCPUCores    = 64
	haHostMemoryBytes = int64(1024) << 30
	// CPU that HA counts for a powered-on VM without a CPU reservation (vSphere
	// Web Services API reference, ClusterFailoverResourcesAdmissionControlPolicy).
	haDefaultCPUMHz = 256
)

// haPriorityRank orders restart priorities, highest first; disabled is absent
// (never restarted).
var haPriorityRank = map[string]int{"highest": 5, "high": 4, "medium": 3, "low": 2, "lowest": 1}

type haRestart struct {
	VM       string  `json:"vm"`
	Priority string  `json:"priority"`
	Host     string  `json:"host,omitempty"`
	At       string  `json:"at,omitempty"`
	Seconds  float64 `json:"seconds_after_failure,omitempty"`
	Reason   string  `json:"reason,omitempty"`
	Recovery bool    `json:"on_recovery,omitempty"`
}

// haFailure is the record of one host failure (answer of /fail, "ha" of /_sim/stats).
type haFailure struct {
	Host       string      `json:"host"`
	Cluster    string      `json:"cluster"`
	HAEnabled  bool        `json:"ha_enabled"`
	FailedAt   string      `json:"failed_at"`
	PoweredOff []string    `json:"powered_off"`
	Restarted  []haRestart `json:"restarted"`
	StayedOff  []haRestart `json:"stayed_off"`
	Recovered  string      `json:"recovered_at,omitempty"`

	failed  time.Time
	pending []types.ManagedObjectReference // VMs that stayed off and HA still restarts (not disabled)
}

var haState = struct {
	mu       sync.Mutex
	failures []*haFailure
	down     map[string]*haFailure // host name -> its failure while it is down
}{down: map[string]*haFailure{}}

// haHostHardware gives a host the CPU cores and memory of a GPU server (hw is
// the host's own copy of its hardware, summary its own summary hardware).
func haHostHardware(hw *types.HostHardwareInfo, summary *types.HostHardwareSummary) {
	hw.CpuInfo.NumCpuCores = haHostCPUCores
	hw.MemorySize = haHostMemoryBytes
	if summary != nil {
		summary.NumCpuCores = haHostCPUCores
		summary.MemorySize = haHostMemoryBytes
	}
}

// hostFailed: the host is down by a simulated failure.
func hostFailed(name string) bool {
	haState.mu.Lock()
	defer haState.mu.Unlock()
	return haState.down[name] != nil
}

// haStats copies the failure records (a failure under way appends to them).
func haStats() []haFailure {
	haState.mu.Lock()
	defer haState.mu.Unlock()
	out := []haFailure{}
	for _, f := range haState.failures {
		c := *f
		c.PoweredOff = append([]string{}, f.PoweredOff...)
		c.Restarted = append([]haRestart{}, f.Restarted...)
		c.StayedOff = append([]haRestart{}, f.StayedOff...)
		c.pending = nil
		out = append(out, c)
	}
	return out
}

func resetHAStats() {
	haState.mu.Lock()
	haState.failures = nil
	haState.mu.Unlock()
}

// haAdmin serves POST /_sim/hosts/<name>/fail and /recover; false for other paths.
func (f *front) haAdmin(w http.ResponseWriter, r *http.Request, p string) bool {
	rest, ok := strings.CutPrefix(p, "/_sim/hosts/")
	if !ok || r.Method != http.MethodPost {
		return false
	}
	name, action, _ := strings.Cut(rest, "/")
	if action != "fail" && action != "recover" {
		return false
	}
	sim.mu.Lock()
	g, known := sim.hosts[name]
	sim.mu.Unlock()
	if !known {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown host " + name})
		return true
	}
	ctx := &simulator.Context{Context: context.Background(), Map: f.reg}
	var rec *haFailure
	var err error
	if action == "fail" {
		rec, err = failHost(ctx, g)
	} else {
		rec, err = recoverHost(ctx, g)
	}
	if err != nil {
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		return true
	}
	haState.mu.Lock()
	body, _ := json.Marshal(rec)
	haState.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
	return true
}

func hostCluster(ctx *simulator.Context, host *simulator.HostSystem) *simulator.ClusterComputeResource {
	if host.Parent == nil {
		return nil
	}
	cr, _ := ctx.Map.Get(*host.Parent).(*simulator.ClusterComputeResource)
	return cr
}

// haConfig reads the cluster's HA settings: enabled, the restart priority of
// each VM (its dasVmConfig override, else the cluster default, else medium),
// and the percentage policy when admission control is on.
func haConfig(ctx *simulator.Context, cr *simulator.ClusterComputeResource) (enabled bool, priority func(types.ManagedObjectReference) string,
	policy *types.ClusterFailoverResourcesAdmissionControlPolicy) {
	overrides := map[string]string{}
	def := "medium" // the vSphere default (vSphere Availability, "VM restart priority")
	ctx.WithLock(cr, func() {
		cfg, ok := cr.ConfigurationEx.(*types.ClusterConfigInfoEx)
		if !ok {
			return
		}
		das := cfg.DasConfig
		enabled = das.Enabled != nil && *das.Enabled
		if das.DefaultVmSettings != nil && das.DefaultVmSettings.RestartPriority != "" {
			def = das.DefaultVmSettings.RestartPriority
		}
		if das.AdmissionControlEnabled != nil && *das.AdmissionControlEnabled {
			policy, _ = das.AdmissionControlPolicy.(*types.ClusterFailoverResourcesAdmissionControlPolicy)
		}
		for _, e := range cfg.DasVmConfig {
			p := string(e.RestartPriority) // deprecated form
			if e.DasSettings != nil && e.DasSettings.RestartPriority != "" {
				p = e.DasSettings.RestartPriority
			}
			overrides[e.Key.Value] = p
		}
	})
	priority = func(vm types.ManagedObjectReference) string {
		p := overrides[vm.Value]
		if p == "" || p == string(types.ClusterDasVmSettingsRestartPriorityClusterRestartPriority) {
			return def
		}
		return p
	}
	return enabled, priority, policy
}

type haVM struct {
	vm       *simulator.VirtualMachine
	priority string
}

// sortHA orders VMs for restart: restart priority, highest first, then the VM name.
func sortHA(list []haVM) {
	sort.SliceStable(list, func(a, b int) bool {
		ra, rb := haPriorityRank[list[a].priority], haPriorityRank[list[b].priority]
		if ra != rb {
			return ra > rb
		}
		return list[a].vm.Name < list[b].vm.Name
	})
}

func setPower(ctx *simulator.Context, vm *simulator.VirtualMachine, state types.VirtualMachinePowerState) {
	var boot any
	if state == types.VirtualMachinePowerStatePoweredOn {
		boot = time.Now()
	}
	ctx.Map.AtomicUpdate(ctx, vm, []types.PropertyChange{
		{Name: "runtime.powerState", Val: state},
		{Name: "summary.runtime.powerState", Val: state},
		{Name: "runtime.bootTime", Val: boot},
		{Name: "summary.runtime.bootTime", Val: boot},
	})
}

func setConnection(ctx *simulator.Context, host *simulator.HostSystem, state types.HostSystemConnectionState) {
	ctx.Map.AtomicUpdate(ctx, host, []types.PropertyChange{{Name: "runtime.connectionState", Val: state}})
	ctx.WithLock(host, func() { host.Summary.Runtime = &host.Runtime })
}

// failHost: the host stops responding, its powered-on VMs go off, and HA
// restarts them on the other hosts of the cluster.
func failHost(ctx *simulator.Context, g *gpuHost) (*haFailure, error) {
	host := ctx.Map.Get(g.ref).(*simulator.HostSystem)
	var conn types.HostSystemConnectionState
	var refs []types.ManagedObjectReference
	ctx.WithLock(host, func() {
		conn = host.Runtime.ConnectionState
		refs = append(refs, host.Vm...)
	})
	if conn != types.HostSystemConnectionStateConnected {
		return nil, fmt.Errorf("host %s is %s, not connected", g.spec.Name, conn)
	}
	cr := hostCluster(ctx, host)
	if cr == nil {
		return nil, fmt.Errorf("host %s is in no cluster (no vSphere HA)", g.spec.Name)
	}
	now := time.Now()
	rec := &haFailure{Host: g.spec.Name, Cluster: cr.Name, FailedAt: stamp(now), failed: now,
		PoweredOff: []string{}, Restarted: []haRestart{}, StayedOff: []haRestart{}}
	haState.mu.Lock()
	haState.down[g.spec.Name] = rec
	haState.failures = append(haState.failures, rec)
	haState.mu.Unlock()
	setConnection(ctx, host, types.HostSystemConnectionStateNotResponding)

	var off []types.ManagedObjectReference
	for _, ref := range refs {
		vm, ok := ctx.Map.Get(ref).(*simulator.VirtualMachine)
		if !ok {
			continue
		}
		var state types.VirtualMachinePowerState
		ctx.WithLock(vm, func() { state = vm.Runtime.PowerState })
		if state != types.VirtualMachinePowerStatePoweredOn {
			continue
		}
		sim.mu.Lock()
		g.release(vm.Self)
		sim.mu.Unlock()
		setPower(ctx, vm, types.VirtualMachinePowerStatePoweredOff)
		off = append(off, ref)
		haState.mu.Lock()
		rec.PoweredOff = append(rec.PoweredOff, vm.Name)
		haState.mu.Unlock()
	}
	sim.render(ctx, g)
	enabled, _, _ := haConfig(ctx, cr)
	haState.mu.Lock()
	rec.HAEnabled = enabled
	haState.mu.Unlock()
	haRestartVMs(ctx, cr, host, rec, off, false)
	return rec, nil
}

// recoverHost brings a failed host back (connected); HA then retries the VMs
// that found no room, the recovered host included.
func recoverHost(ctx *simulator.Context, g *gpuHost) (*haFailure, error) {
	haState.mu.Lock()
	rec := haState.down[g.spec.Name]
	delete(haState.down, g.spec.Name)
	haState.mu.Unlock()
	if rec == nil {
		return nil, fmt.Errorf("host %s did not fail (POST /_sim/hosts/%s/fail)", g.spec.Name, g.spec.Name)
	}
	host := ctx.Map.Get(g.ref).(*simulator.HostSystem)
	setConnection(ctx, host, types.HostSystemConnectionStateConnected)
	haState.mu.Lock()
	rec.Recovered = stamp(time.Now())
	pending := rec.pending
	rec.pending = nil
	haState.mu.Unlock()
	if cr := hostCluster(ctx, host); cr != nil && len(pending) > 0 {
		haRestartVMs(ctx, cr, nil, rec, pending, true)
	}
	return rec, nil
}

// haRestartVMs restarts VMs (powered off by a failure) in restart-priority
// order, each on the first fitting host of the cluster (connected, not in
// maintenance mode, not failed) with the fewest powered-on VMs, host name on
// ties. A VM whose vGPUs fit no host stays off and is recorded with the reasons.
func haRestartVMs(ctx *simulator.Context, cr *simulator.ClusterComputeResource, from *simulator.HostSystem, rec *haFailure,
	refs []types.ManagedObjectReference, recovery bool) {
	enabled, priority, _ := haConfig(ctx, cr)
	var list []haVM
	for _, ref := range refs {
		if vm, ok := ctx.Map.Get(ref).(*simulator.VirtualMachine); ok {
			list = append(list, haVM{vm: vm, priority: priority(ref)})
		}
	}
	sortHA(list)
	var hostRefs []types.ManagedObjectReference
	ctx.WithLock(cr, func() { hostRefs = append(hostRefs, cr.Host...) })
	var pending []types.ManagedObjectReference
	var stayed []haRestart
	for _, item := range list {
		vm := item.vm
		entry := haRestart{VM: vm.Name, Priority: item.priority}
		if !enabled {
			entry.Reason = "vSphere HA is not enabled on cluster " + cr.Name
			stayed = append(stayed, entry)
			continue
		}
		if item.priority == string(types.ClusterDasVmSettingsRestartPriorityDisabled) || haPriorityRank[item.priority] == 0 {
			entry.Reason = "restart priority " + item.priority + ": vSphere HA does not restart it"
			stayed = append(stayed, entry)
			continue
		}
		target, reasons := haPlace(ctx, vm, hostRefs)
		if target == nil {
			entry.Reason = strings.Join(reasons, "; ")
			stayed = append(stayed, entry)
			pending = append(pending, vm.Self)
			continue
		}
		var current *simulator.HostSystem
		ctx.WithLock(vm, func() {
			if vm.Runtime.Host != nil {
				current, _ = ctx.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem)
			}
		})
		if current == nil {
			current = from
		}
		if current != nil && current.Self != target.Self {
			moveVM(ctx, vm, current, target)
		}
		setPower(ctx, vm, types.VirtualMachinePowerStatePoweredOn)
		if tg := sim.hostOf(target.Self); tg != nil {
			sim.render(ctx, tg)
		}
		at := time.Now()
		entry.Host, entry.At, entry.Seconds, entry.Recovery = target.Name, stamp(at), at.Sub(rec.failed).Seconds(), recovery
		haState.mu.Lock()
		rec.Restarted = append(rec.Restarted, entry)
		haState.mu.Unlock()
	}
	haState.mu.Lock()
	if recovery { // the VMs HA did not retry (disabled) stay listed
		retried := map[string]bool{}
		for _, item := range list {
			retried[item.vm.Name] = true
		}
		for _, e := range rec.StayedOff {
			if !retried[e.VM] {
				stayed = append(stayed, e)
			}
		}
	}
	rec.StayedOff = stayed
	if stayed == nil {
		rec.StayedOff = []haRestart{}
	}
	rec.pending = pending
	haState.mu.Unlock()
}

// haPlace finds the host a VM restarts on and stores its vGPU placement there;
// nil and the reason per host when none fits.
func haPlace(ctx *simulator.Context, vm *simulator.VirtualMachine, hostRefs []types.ManagedObjectReference) (*simulator.HostSystem, []string) {
	type cand struct {
		host *simulator.HostSystem
		vms  int
	}
	var cands []cand
	var reasons []string
	for _, ref := range hostRefs {
		h, ok := ctx.Map.Get(ref).(*simulator.HostSystem)
		if !ok {
			continue
		}
		var usable bool
		var vms []types.ManagedObjectReference
		ctx.WithLock(h, func() {
			usable = h.Runtime.ConnectionState == types.HostSystemConnectionStateConnected && !h.Runtime.InMaintenanceMode
			vms = append(vms, h.Vm...)
		})
		if !usable || hostFailed(h.Name) {
			continue
		}
		on := 0
		for _, r := range vms {
			if other, ok := ctx.Map.Get(r).(*simulator.VirtualMachine); ok {
				ctx.WithLock(other, func() {
					if other.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
						on++
					}
				})
			}
		}
		cands = append(cands, cand{h, on})
	}
	sort.SliceStable(cands, func(a, b int) bool {
		if cands[a].vms != cands[b].vms {
			return cands[a].vms < cands[b].vms
		}
		return cands[a].host.Name < cands[b].host.Name
	})
	if len(cands) == 0 {
		return nil, []string{"no other connected host in the cluster"}
	}
	profiles := vmProfiles(vm)
	for _, c := range cands {
		if len(profiles) == 0 {
			return c.host, nil
		}
		g := sim.hostOf(c.host.Self)
		if g == nil || g.spec.GPUCount == 0 {
			reasons = append(reasons, "host "+c.host.Name+" has no GPU")
			continue
		}
		sim.mu.Lock()
		_, err := g.place(vm.Self, vm.Name, profiles)
		sim.mu.Unlock()
		if err == nil {
			return c.host, nil
		}
		reasons = append(reasons, err.Error())
	}
	return nil, reasons
}

// haAdmission is HA admission control for a power-on: with the percentage-based
// policy, the CPU and memory the cluster's powered-on VMs reserve (this VM
// included) must stay within the capacity of its connected hosts less the
// failover percentages. nil: admitted.
func haAdmission(ctx *simulator.Context, vm *simulator.VirtualMachine) types.BaseMethodFault {
	var hostRef *types.ManagedObjectReference
	ctx.WithLock(vm, func() { hostRef = vm.Runtime.Host })
	if hostRef == nil {
		return nil
	}
	host, ok := ctx.Map.Get(*hostRef).(*simulator.HostSystem)
	if !ok {
		return nil
	}
	cr := hostCluster(ctx, host)
	if cr == nil {
		return nil
	}
	enabled, _, policy := haConfig(ctx, cr)
	if !enabled || policy == nil {
		return nil
	}
	var hostRefs []types.ManagedObjectReference
	ctx.WithLock(cr, func() { hostRefs = append(hostRefs, cr.Host...) })
	var cpuTotal, memTotal, cpuUsed, memUsed int64
	for _, ref := range hostRefs {
		h, ok := ctx.Map.Get(ref).(*simulator.HostSystem)
		if !ok {
			continue
		}
		var vms []types.ManagedObjectReference
		ctx.WithLock(h, func() {
			if h.Runtime.ConnectionState != types.HostSystemConnectionStateConnected || h.Runtime.InMaintenanceMode || h.Summary.Hardware == nil {
				return
			}
			cpuTotal += int64(h.Summary.Hardware.CpuMhz) * int64(h.Summary.Hardware.NumCpuCores)
			memTotal += h.Summary.Hardware.MemorySize >> 20
			vms = append(vms, h.Vm...)
		})
		for _, r := range vms {
			other, ok := ctx.Map.Get(r).(*simulator.VirtualMachine)
			if !ok || other.Self == vm.Self {
				continue
			}
			ctx.WithLock(other, func() {
				if other.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
					c, m := vmReservation(other)
					cpuUsed, memUsed = cpuUsed+c, memUsed+m
				}
			})
		}
	}
	var cpuVM, memVM int64
	ctx.WithLock(vm, func() { cpuVM, memVM = vmReservation(vm) })
	cpuCap := cpuTotal * int64(100-policy.CpuFailoverResourcesPercent) / 100
	memCap := memTotal * int64(100-policy.MemoryFailoverResourcesPercent) / 100
	what := ""
	switch {
	case memUsed+memVM > memCap:
		what = fmt.Sprintf("memory: the powered-on VMs reserve %d MB, this VM %d MB more, of %d MB the connected hosts offer with %d%% kept for failover (at most %d MB)",
			memUsed, memVM, memTotal, policy.MemoryFailoverResourcesPercent, memCap)
	case cpuUsed+cpuVM > cpuCap:
		what = fmt.Sprintf("CPU: the powered-on VMs reserve %d MHz, this VM %d MHz more, of %d MHz the connected hosts offer with %d%% kept for failover (at most %d MHz)",
			cpuUsed, cpuVM, cpuTotal, policy.CpuFailoverResourcesPercent, cpuCap)
	default:
		return nil
	}
	return simFault(&types.InsufficientFailoverResourcesFault{},
		"Insufficient resources to satisfy the configured failover level for vSphere HA: powering on VM %s in cluster %s would leave less than the reserved failover capacity; %s",
		vm.Name, cr.Name, what)
}

// vmReservation is what HA admission control counts for a powered-on VM: its
// CPU reservation (256 MHz when it has none) and its memory reservation (all
// its memory with memoryReservationLockedToMax, as a vGPU VM has). Call with
// the VM locked.
func vmReservation(vm *simulator.VirtualMachine) (cpuMHz, memMB int64) {
	cpuMHz = haDefaultCPUMHz
	if vm.Config == nil {
		return cpuMHz, 0
	}
	if a := vm.Config.CpuAllocation; a != nil && a.Reservation != nil && *a.Reservation > 0 {
		cpuMHz = *a.Reservation
	}
	if vm.Config.MemoryReservationLockedToMax != nil && *vm.Config.MemoryReservationLockedToMax {
		memMB = int64(vm.Config.Hardware.MemoryMB)
	} else if a := vm.Config.MemoryAllocation; a != nil && a.Reservation != nil {
		memMB = *a.Reservation
	}
	return cpuMHz, memMB
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }
