package main

// Behaviour added to existing vcsim objects without wrapping their types:
// the Registry.Handler hook routes a few methods to small handler objects
// (hostOps, vmOps, envBrowserOps) that share the target's reference, so the
// simulator's locking and dispatch stay as they are.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// dispatch is installed as Registry.Handler. vcsim looks the handler up
// again in the caller's session after this hook, so returning an object is
// not enough: the method's target is re-pointed at a small ops object kept in
// the registry (one per target) that implements the method.
func dispatch(ctx *simulator.Context, m *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	var ops mo.Reference
	switch m.Name {
	case "RebootHost_Task", "EnterMaintenanceMode_Task":
		if h, ok := ctx.Map.Get(m.This).(*simulator.HostSystem); ok {
			ops = opsFor(ctx, m.This, func(self types.ManagedObjectReference) mo.Reference { return &hostOps{Self: self, host: h} })
		}
	case "PowerOnVM_Task":
		if vm, ok := ctx.Map.Get(m.This).(*simulator.VirtualMachine); ok {
			ops = opsFor(ctx, m.This, func(self types.ManagedObjectReference) mo.Reference { return &vmOps{Self: self, vm: vm} })
		}
	case "QueryConfigTarget":
		if b, ok := ctx.Map.Get(m.This).(*simulator.EnvironmentBrowser); ok {
			ops = opsFor(ctx, m.This, func(self types.ManagedObjectReference) mo.Reference { return &envBrowserOps{Self: self, browser: b} })
		}
	}
	if ops == nil {
		return nil, nil
	}
	m.This = ops.Reference()
	return ops, nil
}

var opsMu sync.Mutex

// opsFor returns the ops object for a target, creating it on first use.
func opsFor(ctx *simulator.Context, target types.ManagedObjectReference, create func(types.ManagedObjectReference) mo.Reference) mo.Reference {
	self := types.ManagedObjectReference{Type: "GpupoolOps", Value: target.Type + "-" + target.Value}
	opsMu.Lock()
	defer opsMu.Unlock()
	if obj := ctx.Map.Get(self); obj != nil {
		return obj
	}
	return ctx.Map.Put(create(self))
}

// hostOps adds reboot and evacuating maintenance mode to HostSystem.
type hostOps struct {
	Self types.ManagedObjectReference
	host *simulator.HostSystem
}

func (h *hostOps) Reference() types.ManagedObjectReference { return h.Self }

func (h *hostOps) RebootHostTask(ctx *simulator.Context, req *types.RebootHost_Task) soap.HasFault {
	host := h.host
	g := sim.hostOf(host.Self)
	task := simulator.CreateTask(host, "rebootHost", func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
		if g != nil {
			if msg, ok := sim.takeFault(g.spec.Name, "reboot"); ok {
				return nil, simFault(&types.PlatformConfigFault{Text: msg}, "%s", msg)
			}
		}
		if !req.Force && !host.Runtime.InMaintenanceMode {
			return nil, simFault(&types.InvalidState{}, "host %s is not in maintenance mode: reboot it in maintenance mode or with force", host.Name)
		}
		if host.Runtime.ConnectionState != types.HostSystemConnectionStateConnected {
			return nil, simFault(&types.InvalidState{}, "host %s is %s", host.Name, host.Runtime.ConnectionState)
		}
		ctx.Update(host, []types.PropertyChange{
			{Name: "runtime.connectionState", Val: types.HostSystemConnectionStateNotResponding},
		})
		host.Summary.Runtime = &host.Runtime
		go sim.finishReboot(ctx.Map, host, g)
		return nil, nil
	})
	return &methods.RebootHost_TaskBody{Res: &types.RebootHost_TaskResponse{Returnval: task.Run(ctx)}}
}

// finishReboot brings the host back after the reboot delay: the driver
// installed on disk becomes the running one, boot time moves on.
func (s *simState) finishReboot(reg *simulator.Registry, host *simulator.HostSystem, g *gpuHost) {
	time.Sleep(s.rebootDelay)
	ctx := &simulator.Context{Context: context.Background(), Map: reg}
	if g != nil {
		s.mu.Lock()
		g.running = g.installed
		g.rebootRequired = false
		g.rebootCount++
		s.mu.Unlock()
	}
	now := time.Now()
	reg.AtomicUpdate(ctx, host, []types.PropertyChange{
		{Name: "runtime.connectionState", Val: types.HostSystemConnectionStateConnected},
		{Name: "runtime.bootTime", Val: now},
		{Name: "summary.rebootRequired", Val: false},
	})
	if g != nil {
		s.render(ctx, g)
	}
}

func (h *hostOps) EnterMaintenanceModeTask(ctx *simulator.Context, req *types.EnterMaintenanceMode_Task) soap.HasFault {
	host := h.host
	task := simulator.CreateTask(host, "enterMaintenanceMode", func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
		if host.Runtime.InMaintenanceMode {
			return nil, nil
		}
		var blocked []string
		var movable []*simulator.VirtualMachine
		for _, ref := range host.Vm {
			vm, ok := ctx.Map.Get(ref).(*simulator.VirtualMachine)
			if !ok || vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
				continue // powered-off VMs stay registered, as with evacuatePoweredOffVms unset
			}
			if len(vmProfiles(vm)) > 0 {
				blocked = append(blocked, vm.Name)
			} else {
				movable = append(movable, vm)
			}
		}
		if len(blocked) > 0 {
			return nil, simFault(&types.InvalidState{}, "%d powered-on VMs with vGPU devices cannot be evacuated: %s", len(blocked), strings.Join(blocked, ", "))
		}
		if len(movable) > 0 {
			target := evacuationTarget(ctx, host)
			if target == nil {
				return nil, simFault(&types.InvalidState{}, "no other connected host in the cluster of %s to evacuate %d powered-on VMs to", host.Name, len(movable))
			}
			for _, vm := range movable {
				moveVM(ctx, vm, host, target)
			}
		}
		ctx.Update(host, []types.PropertyChange{{Name: "runtime.inMaintenanceMode", Val: true}})
		return nil, nil
	})
	return &methods.EnterMaintenanceMode_TaskBody{Res: &types.EnterMaintenanceMode_TaskResponse{Returnval: task.Run(ctx)}}
}

// evacuationTarget picks the connected, not-in-maintenance host of the same
// cluster with the fewest VMs.
func evacuationTarget(ctx *simulator.Context, host *simulator.HostSystem) *simulator.HostSystem {
	if host.Parent == nil {
		return nil
	}
	cr, ok := ctx.Map.Get(*host.Parent).(*simulator.ClusterComputeResource)
	if !ok {
		return nil
	}
	var best *simulator.HostSystem
	for _, ref := range cr.Host {
		if ref == host.Self {
			continue
		}
		other, ok := ctx.Map.Get(ref).(*simulator.HostSystem)
		if !ok || other.Runtime.InMaintenanceMode || other.Runtime.ConnectionState != types.HostSystemConnectionStateConnected {
			continue
		}
		if best == nil || len(other.Vm) < len(best.Vm) {
			best = other
		}
	}
	return best
}

// moveVM re-registers a VM on another host, as a completed vMotion would.
func moveVM(ctx *simulator.Context, vm *simulator.VirtualMachine, from, to *simulator.HostSystem) {
	ref := to.Self
	ctx.WithLock(vm, func() {
		ctx.Update(vm, []types.PropertyChange{{Name: "runtime.host", Val: ref}})
		vm.Summary.Runtime.Host = &ref
	})
	ctx.Map.RemoveReference(ctx, from, &from.Vm, vm.Self)
	ctx.WithLock(to, func() {
		ctx.Map.AddReference(ctx, to, &to.Vm, vm.Self)
	})
}

// vmOps checks a VM's vGPU profiles against its host before power-on.
type vmOps struct {
	Self types.ManagedObjectReference
	vm   *simulator.VirtualMachine
}

func (v *vmOps) Reference() types.ManagedObjectReference { return v.Self }

func (v *vmOps) PowerOnVMTask(ctx *simulator.Context, req *types.PowerOnVM_Task) soap.HasFault {
	vm := v.vm
	if vm.Runtime.Host != nil {
		if g := sim.hostOf(*vm.Runtime.Host); g != nil {
			sim.mu.Lock()
			var missing []string
			for _, p := range vmProfiles(vm) {
				if !g.offers(p) {
					missing = append(missing, p)
				}
			}
			sim.mu.Unlock()
			if len(missing) > 0 {
				msg := fmt.Sprintf("host %s does not offer vGPU profile %s", g.spec.Name, strings.Join(missing, ", "))
				if g.spec.Model != nil && g.running == "" {
					msg += " (no NVIDIA host driver loaded)"
				}
				return &methods.PowerOnVM_TaskBody{Fault_: simulator.Fault(msg, simFault(&types.InvalidDeviceSpec{}, "%s", msg))}
			}
		}
	}
	var res soap.HasFault
	ctx.WithLock(vm, func() { res = vm.PowerOnVMTask(ctx, req) })
	if vm.Runtime.Host != nil {
		if g := sim.hostOf(*vm.Runtime.Host); g != nil && len(vmProfiles(vm)) > 0 {
			go func() { // refresh graphicsInfo.vm once the power-on task is done
				time.Sleep(50 * time.Millisecond)
				sim.render(&simulator.Context{Context: context.Background(), Map: ctx.Map}, g)
			}()
		}
	}
	return res
}

// envBrowserOps adds vgpuProfileInfo to QueryConfigTarget.
type envBrowserOps struct {
	Self    types.ManagedObjectReference
	browser *simulator.EnvironmentBrowser
}

func (e *envBrowserOps) Reference() types.ManagedObjectReference { return e.Self }

func (e *envBrowserOps) QueryConfigTarget(ctx *simulator.Context, req *types.QueryConfigTarget) soap.HasFault {
	res := e.browser.QueryConfigTarget(ctx, req)
	body, ok := res.(*methods.QueryConfigTargetBody)
	if !ok || body.Res == nil || body.Res.Returnval == nil {
		return res
	}
	target := *body.Res.Returnval // copy: the browser may hand out a shared value
	target.VgpuProfileInfo = nil

	var hosts []types.ManagedObjectReference
	if req.Host != nil {
		hosts = []types.ManagedObjectReference{*req.Host}
	} else {
		for ref := range e.hostsOfBrowser(ctx) {
			hosts = append(hosts, ref)
		}
	}
	seen := map[string]bool{}
	sim.mu.Lock()
	for _, ref := range hosts {
		g := sim.hostOf(ref)
		if g == nil {
			continue
		}
		for _, p := range g.offered() {
			if seen[p.Name] {
				continue
			}
			seen[p.Name] = true
			target.VgpuProfileInfo = append(target.VgpuProfileInfo, types.VirtualMachineVgpuProfileInfo{
				VirtualMachineTargetInfo: types.VirtualMachineTargetInfo{Name: p.Name},
				ProfileName:              p.Name,
				DeviceVendorId:           nvidiaVendorID,
				FbSizeInGib:              int64(p.FbGB),
				ProfileSharing:           p.Sharing,
				ProfileClass:             p.Class,
			})
		}
	}
	sim.mu.Unlock()
	body.Res = &types.QueryConfigTargetResponse{Returnval: &target}
	return body
}

// hostsOfBrowser finds the hosts of the compute resource owning the browser.
func (e *envBrowserOps) hostsOfBrowser(ctx *simulator.Context) map[types.ManagedObjectReference]bool {
	out := map[types.ManagedObjectReference]bool{}
	for _, ref := range sim.clusters {
		cr, ok := ctx.Map.Get(ref).(*simulator.ClusterComputeResource)
		if ok && cr.EnvironmentBrowser != nil && *cr.EnvironmentBrowser == e.browser.Self {
			for _, h := range cr.Host {
				out[h] = true
			}
		}
	}
	return out
}

// taskMessages gives failed tasks a readable error message: vcsim sets the
// task's localizedMessage to the fault's Go type name, this replaces it with
// the message simFault stored in the fault.
type taskMessages struct {
	Self types.ManagedObjectReference
}

func (t *taskMessages) Reference() types.ManagedObjectReference                       { return t.Self }
func (t *taskMessages) PutObject(*simulator.Context, mo.Reference)                    {}
func (t *taskMessages) RemoveObject(*simulator.Context, types.ManagedObjectReference) {}

func (t *taskMessages) UpdateObject(_ *simulator.Context, obj mo.Reference, changes []types.PropertyChange) {
	task, ok := obj.(*mo.Task)
	if !ok || task.Info.Error == nil {
		return
	}
	msg := faultMessage(task.Info.Error.Fault)
	if !strings.HasPrefix(task.Info.Error.LocalizedMessage, "*types.") || strings.HasPrefix(msg, "*types.") {
		return
	}
	task.Info.Error.LocalizedMessage = msg
	for i := range changes {
		if changes[i].Name != "info.error" {
			continue
		}
		switch v := changes[i].Val.(type) {
		case types.LocalizedMethodFault:
			v.LocalizedMessage = msg
			changes[i].Val = v
		case *types.LocalizedMethodFault:
			v.LocalizedMessage = msg
		}
	}
}
