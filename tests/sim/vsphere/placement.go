package main

// Which GPU of a host each vGPU of a powered-on VM sits on, decided at
// power-on and kept until power-off, and the rules that decide whether a
// vGPU fits a GPU (README.md, "What ESXi and the vGPU manager refuse").

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// vGPU modes of a GPU as vSphere names them (HostGraphicsConfigVgpuMode_enum,
// HostGraphicsInfoVgpuMode_enum, API 8.0.3).
const (
	vgpuSameSize  = "sameSize"
	vgpuMixedSize = "mixedSize"
	vgpuMIG       = "multiInstanceGpu"
)

// placedVGPU is one vGPU of a powered-on VM on a GPU.
type placedVGPU struct {
	VM      types.ManagedObjectReference
	Name    string // the VM's name
	Profile vgpuProfile
}

// ensureGPUState sizes the per-GPU state of a host to its GPUs: MIG mode
// disabled, vGPU mode sameSize, nothing placed (call with sim.mu held).
func (g *gpuHost) ensureGPUState() {
	n := g.spec.GPUCount
	if len(g.mig) != n {
		g.mig = make([]gpuMig, n)
	}
	if len(g.vgpuMode) != n {
		g.vgpuMode = make([]string, n)
		for i := range g.vgpuMode {
			g.vgpuMode[i] = vgpuSameSize
		}
	}
	if len(g.placed) != n {
		g.placed = make([][]placedVGPU, n)
	}
}

// profile looks up a vGPU profile the host's GPU model offers.
func (g *gpuHost) profile(name string) (vgpuProfile, bool) {
	for _, p := range g.offered() {
		if p.Name == name {
			return p, true
		}
	}
	return vgpuProfile{}, false
}

// busy: a powered-on VM's vGPU sits on GPU i (call with sim.mu held).
func (g *gpuHost) busy(i int) bool {
	g.ensureGPUState()
	return i >= 0 && i < len(g.placed) && len(g.placed[i]) > 0
}

// shownVgpuMode is HostGraphicsInfo.vgpuMode of GPU i: multiInstanceGpu while
// MIG mode is current, else the configured sameSize or mixedSize.
func (g *gpuHost) shownVgpuMode(i int) string {
	g.ensureGPUState()
	if g.mig[i].Current {
		return vgpuMIG
	}
	return g.vgpuMode[i]
}

// fits says whether one more vGPU of profile p fits GPU i next to what is
// placed there (plus extra, the VM's vGPUs placed before it in this power-on),
// or why not. Call with sim.mu held.
func (g *gpuHost) fits(i int, p vgpuProfile, extra []placedVGPU) (bool, string) {
	g.ensureGPUState()
	on := append(append([]placedVGPU(nil), g.placed[i]...), extra...)
	if p.MIG != nil {
		if !g.mig[i].Current {
			return false, "MIG mode is disabled (a MIG-backed vGPU needs a GPU in MIG mode)"
		}
		mix := []*migProfile{p.MIG}
		for _, v := range on {
			if v.Profile.MIG == nil { // cannot happen: MIG mode refuses time-sliced vGPUs
				return false, fmt.Sprintf("carries time-sliced vGPU %s", v.Profile.Name)
			}
			mix = append(mix, v.Profile.MIG)
		}
		if why := migMixFits(mix); why != "" {
			return false, why
		}
		return true, ""
	}
	if g.mig[i].Current {
		return false, "MIG mode is enabled (only MIG-backed vGPUs run on a GPU in MIG mode)"
	}
	used := 0
	for _, v := range on {
		used += v.Profile.FbGB
		if g.vgpuMode[i] != vgpuMixedSize && v.Profile.Name != p.Name {
			return false, fmt.Sprintf("vGPU mode sameSize and it carries %s (one vGPU profile per GPU in sameSize mode)", v.Profile.Name)
		}
	}
	if used+p.FbGB > g.spec.Model.MemoryGB {
		return false, fmt.Sprintf("%d GB of its %d GB frame buffer in use, %d GB more do not fit", used, g.spec.Model.MemoryGB, p.FbGB)
	}
	return true, ""
}

// migMixFits checks a set of GPU instances against one GPU: per-profile
// instance limits, at most one +me instance, the small one-slice profile and
// its +me variant together within the small profile's limit, 7 compute and 8
// memory slices, and a placement at the allowed start positions. "" when it
// fits, else the reason.
func migMixFits(mix []*migProfile) string {
	count := map[string]int{}
	compute, memory, media, small := 0, 0, 0, 0
	smallMax := 0
	for _, m := range mix {
		count[m.name()]++
		compute += m.Slices
		memory += m.Mem
		if m.Media {
			media++
		}
		if m.Mem == 1 {
			small++
			if !m.Media {
				smallMax = m.Max
			}
		}
	}
	names := make([]string, 0, len(count))
	for n := range count {
		names = append(names, n)
	}
	sort.Strings(names)
	if media > 1 {
		return "at most one media-extension (+me) GPU instance per GPU"
	}
	for _, m := range mix {
		if count[m.name()] > m.Max {
			return fmt.Sprintf("at most %d GPU instance(s) %s per GPU, this would be %d", m.Max, m.name(), count[m.name()])
		}
	}
	if smallMax > 0 && small > smallMax {
		return fmt.Sprintf("at most %d one-slice GPU instances (with +me) per GPU, this would be %d", smallMax, small)
	}
	var held []string
	for _, n := range names {
		held = append(held, fmt.Sprintf("%dx %s", count[n], n))
	}
	if compute > migComputeSlices {
		return fmt.Sprintf("no room for its GPU instance: %s need %d compute slices, a GPU has %d", strings.Join(held, ", "), compute, migComputeSlices)
	}
	if memory > migMemorySlices {
		return fmt.Sprintf("no room for its GPU instance: %s need %d memory slices, a GPU has %d", strings.Join(held, ", "), memory, migMemorySlices)
	}
	order := append([]*migProfile(nil), mix...)
	sort.SliceStable(order, func(a, b int) bool {
		if order[a].Mem != order[b].Mem {
			return order[a].Mem > order[b].Mem
		}
		if order[a].Slices != order[b].Slices {
			return order[a].Slices > order[b].Slices
		}
		return len(order[a].Starts) < len(order[b].Starts)
	})
	if !migPlace(order, 0, 0) {
		return fmt.Sprintf("no room for its GPU instance: %s add up but have no placement at the allowed start positions", strings.Join(held, ", "))
	}
	return ""
}

// migPlace places instances[index:] on the memory slices not in occupied.
func migPlace(instances []*migProfile, index int, occupied uint) bool {
	if index == len(instances) {
		return true
	}
	m := instances[index]
	run := uint(1)<<uint(m.Mem) - 1
	for _, start := range m.Starts {
		if start+m.Mem > migMemorySlices {
			continue
		}
		mask := run << uint(start)
		if occupied&mask != 0 {
			continue
		}
		if migPlace(instances, index+1, occupied|mask) {
			return true
		}
	}
	return false
}

// choose picks the GPU for one vGPU by the host's assignment policy:
// performance takes the fitting GPU with the fewest vGPUs, consolidation the
// one with the most; the lowest index on ties. -1 and the reason per GPU when
// none fits. Call with sim.mu held.
func (g *gpuHost) choose(p vgpuProfile, extra map[int][]placedVGPU) (int, []string) {
	best, bestN := -1, 0
	var why []string
	for i := 0; i < g.spec.GPUCount; i++ {
		ok, reason := g.fits(i, p, extra[i])
		if !ok {
			why = append(why, fmt.Sprintf("GPU %d (%s): %s", i, pciID(gpuBus(i)), reason))
			continue
		}
		n := len(g.placed[i]) + len(extra[i])
		switch {
		case best < 0:
			best, bestN = i, n
		case g.graphics.SharedPassthruAssignmentPolicy == "consolidation" && n > bestN:
			best, bestN = i, n
		case g.graphics.SharedPassthruAssignmentPolicy != "consolidation" && n < bestN:
			best, bestN = i, n
		}
	}
	return best, why
}

// place decides and stores the GPU of every vGPU of a VM being powered on
// (profiles in device order). On failure nothing is stored and the error
// names the VM, the host, the profile and the reason per GPU. Call with
// sim.mu held.
func (g *gpuHost) place(vm types.ManagedObjectReference, name string, profiles []string) ([]int, error) {
	g.ensureGPUState()
	g.release(vm) // a VM holds its GPUs once
	extra := map[int][]placedVGPU{}
	var gpus []int
	for n, pn := range profiles {
		p, ok := g.profile(pn)
		if !ok {
			return nil, fmt.Errorf("host %s does not offer vGPU profile %s", g.spec.Name, pn)
		}
		i, why := g.choose(p, extra)
		if i < 0 {
			which := ""
			if len(profiles) > 1 {
				which = fmt.Sprintf(" (vGPU %d of %d)", n+1, len(profiles))
			}
			return nil, fmt.Errorf("Could not power on VM %s: no GPU of host %s can hold vGPU %s%s: %s",
				name, g.spec.Name, pn, which, strings.Join(why, "; "))
		}
		extra[i] = append(extra[i], placedVGPU{VM: vm, Name: name, Profile: p})
		gpus = append(gpus, i)
	}
	for i, list := range extra {
		g.placed[i] = append(g.placed[i], list...)
	}
	return gpus, nil
}

// release drops a VM's vGPUs from the host's GPUs; whether it held any.
// Call with sim.mu held.
func (g *gpuHost) release(vm types.ManagedObjectReference) bool {
	g.ensureGPUState()
	found := false
	for i, list := range g.placed {
		kept := list[:0]
		for _, v := range list {
			if v.VM.Value == vm.Value {
				found = true
				continue
			}
			kept = append(kept, v)
		}
		g.placed[i] = kept
	}
	return found
}

// vmsByGPU is graphicsInfo[].vm: per GPU the VMs placed on it, each once, in
// the order they were placed. Call with sim.mu held.
func (g *gpuHost) vmsByGPU() map[int][]types.ManagedObjectReference {
	g.ensureGPUState()
	out := map[int][]types.ManagedObjectReference{}
	for i, list := range g.placed {
		seen := map[string]bool{}
		for _, v := range list {
			if !seen[v.VM.Value] {
				seen[v.VM.Value] = true
				out[i] = append(out[i], v.VM)
			}
		}
	}
	return out
}

// releaseIfOff drops the placement of a VM that is not powered on (after a
// power task finished, whatever its result).
func (s *simState) releaseIfOff(ctx *simulator.Context, vm *simulator.VirtualMachine, g *gpuHost) {
	var state types.VirtualMachinePowerState
	ctx.WithLock(vm, func() { state = vm.Runtime.PowerState })
	if state == types.VirtualMachinePowerStatePoweredOn {
		return
	}
	s.mu.Lock()
	g.release(vm.Self)
	s.mu.Unlock()
}

// gpusView is the "gpus" list of GET /_sim/hosts/<name>. Call with sim.mu held.
func (g *gpuHost) gpusView() []map[string]any {
	g.ensureGPUState()
	out := []map[string]any{}
	for i := 0; i < g.spec.GPUCount; i++ {
		vms := []map[string]any{}
		for _, v := range g.placed[i] {
			vms = append(vms, map[string]any{"name": v.Name, "profile": v.Profile.Name})
		}
		out = append(out, map[string]any{
			"index": i, "pci_id": pciID(gpuBus(i)),
			"mig_current": g.mig[i].Current, "mig_pending": g.mig[i].Pending,
			"vgpu_mode": g.shownVgpuMode(i), "vgpu_mode_configured": g.vgpuMode[i],
			"vms": vms,
		})
	}
	return out
}
