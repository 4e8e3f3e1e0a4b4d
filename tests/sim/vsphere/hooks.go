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
	"sync/atomic"
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
	if fault := refusal(ctx, m); fault != nil {
		return nil, fault
	}
	var ops mo.Reference
	switch m.Name {
	case "HasPrivilegeOnEntities", "HasPrivilegeOnEntity", "HasUserPrivilegeOnEntities", "FetchUserPrivilegeOnEntities":
		if mgr, ok := ctx.Map.Get(m.This).(*simulator.AuthorizationManager); ok {
			ops = opsFor(ctx, m.This, func(self types.ManagedObjectReference) mo.Reference { return &authzOps{Self: self, mgr: mgr} })
		}
	case "RebootHost_Task", "EnterMaintenanceMode_Task", "ExitMaintenanceMode_Task", "ReconnectHost_Task":
		if h, ok := ctx.Map.Get(m.This).(*simulator.HostSystem); ok {
			ops = opsFor(ctx, m.This, func(self types.ManagedObjectReference) mo.Reference { return &hostOps{Self: self, host: h} })
		}
	case "PowerOnVM_Task", "PowerOffVM_Task":
		if vm, ok := ctx.Map.Get(m.This).(*simulator.VirtualMachine); ok {
			ops = opsFor(ctx, m.This, func(self types.ManagedObjectReference) mo.Reference { return &vmOps{Self: self, vm: vm} })
		}
	case "AddCustomFieldDef", "RemoveCustomFieldDef", "RenameCustomFieldDef", "SetField":
		if cfm, ok := ctx.Map.Get(m.This).(*simulator.CustomFieldsManager); ok {
			ops = opsFor(ctx, m.This, func(self types.ManagedObjectReference) mo.Reference { return &customFieldOps{Self: self, cfm: cfm} })
		}
	case "ReconfigureComputeResource_Task":
		if cl, ok := ctx.Map.Get(m.This).(*simulator.ClusterComputeResource); ok {
			ops = opsFor(ctx, m.This, func(self types.ManagedObjectReference) mo.Reference { return &clusterOps{Self: self, cluster: cl} })
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

// hostFault takes the injected fault for (host, op) at call time: a failing
// fault makes the task body fail with its message, a hanging one makes the
// task wait for the faults to be cleared.
func hostFault(host *simulator.HostSystem, op string) (fail string, hold <-chan struct{}) {
	g := sim.hostOf(host.Self)
	if g == nil {
		return "", nil
	}
	f := sim.takeFaultEntry(g.spec.Name + "/" + op)
	switch {
	case f == nil:
		return "", nil
	case f.Hang:
		return "", sim.hold()
	default:
		return f.Message, nil
	}
}

func (h *hostOps) RebootHostTask(ctx *simulator.Context, req *types.RebootHost_Task) soap.HasFault {
	host := h.host
	g := sim.hostOf(host.Self)
	fail, hold := hostFault(host, "reboot")
	task := startTask(ctx, host, "rebootHost", hold, func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
		if fail != "" {
			return nil, simFault(&types.PlatformConfigFault{Text: fail}, "%s", fail)
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
		hang := false // reboot_hang is used up only by a reboot that happens
		if g != nil {
			_, hang = sim.takeFault(g.spec.Name, "reboot_hang")
			sim.mu.Lock()
			g.rebooting, g.hung = true, hang
			sim.mu.Unlock()
		}
		if !hang {
			go sim.finishReboot(ctx.Map, host, g, sim.rebootDelay)
		}
		return nil, nil
	})
	return &methods.RebootHost_TaskBody{Res: &types.RebootHost_TaskResponse{Returnval: task}}
}

// finishReboot brings the host back after delay: the driver installed on
// disk becomes the running one, the configured nvidia module options the
// loaded ones, boot time moves on.
func (s *simState) finishReboot(reg *simulator.Registry, host *simulator.HostSystem, g *gpuHost, delay time.Duration) {
	time.Sleep(delay)
	ctx := &simulator.Context{Context: context.Background(), Map: reg}
	if g != nil {
		s.mu.Lock()
		if g.hung { // reboot_hang was injected again meanwhile: stay down
			s.mu.Unlock()
			return
		}
		g.running = g.installed
		g.nvidiaOptionsLoaded = g.nvidiaOptions
		migAtBoot(g)
		g.rebootRequired = false
		g.rebootCount++
		g.rebooting = false
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

// reconnectHung brings back a host held by reboot_hang; false when the host
// is not waiting for that.
func (s *simState) reconnectHung(g *gpuHost) bool {
	s.mu.Lock()
	hung := g.hung
	g.hung = false
	s.mu.Unlock()
	if hung {
		s.finishReboot(s.reg, s.reg.Get(g.ref).(*simulator.HostSystem), g, 0)
	}
	return hung
}

// ReconnectHostTask fails while the host is down after a reboot (as vCenter
// does when it cannot contact the host); otherwise it is vcsim's.
func (h *hostOps) ReconnectHostTask(ctx *simulator.Context, req *types.ReconnectHost_Task) soap.HasFault {
	host := h.host
	if g := sim.hostOf(host.Self); g != nil {
		sim.mu.Lock()
		down := g.rebooting
		sim.mu.Unlock()
		down = down || hostFailed(g.spec.Name) // a failed host (ha_failover.go) answers no one
		if down {
			task := simulator.CreateTask(host, "reconnectHost", func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
				return nil, simFault(&types.NoHost{Name: host.Name}, "Cannot contact the specified host (%s). The host may not be available on the network, a network configuration problem may exist, or the management services on this host may not be responding.", host.Name)
			})
			return &methods.ReconnectHost_TaskBody{Res: &types.ReconnectHost_TaskResponse{Returnval: task.Run(ctx)}}
		}
	}
	var res soap.HasFault
	ctx.WithLock(host, func() { res = host.ReconnectHostTask(ctx, req) })
	return res
}

func (h *hostOps) EnterMaintenanceModeTask(ctx *simulator.Context, req *types.EnterMaintenanceMode_Task) soap.HasFault {
	host := h.host
	fail, hold := hostFault(host, "enter_maintenance")
	task := startTask(ctx, host, "enterMaintenanceMode", hold, func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
		if fail != "" {
			return nil, simFault(&types.PlatformConfigFault{Text: fail}, "%s", fail)
		}
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
	return &methods.EnterMaintenanceMode_TaskBody{Res: &types.EnterMaintenanceMode_TaskResponse{Returnval: task}}
}

func (h *hostOps) ExitMaintenanceModeTask(ctx *simulator.Context, req *types.ExitMaintenanceMode_Task) soap.HasFault {
	host := h.host
	fail, hold := hostFault(host, "exit_maintenance")
	task := startTask(ctx, host, "exitMaintenanceMode", hold, func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
		if fail != "" {
			return nil, simFault(&types.PlatformConfigFault{Text: fail}, "%s", fail)
		}
		ctx.Update(host, []types.PropertyChange{{Name: "runtime.inMaintenanceMode", Val: false}})
		return nil, nil
	})
	return &methods.ExitMaintenanceMode_TaskBody{Res: &types.ExitMaintenanceMode_TaskResponse{Returnval: task}}
}

// hangLock is the lock owner of a hung task while it waits: the task's
// entity itself is not locked then, so its properties stay readable.
type hangLock struct {
	Self types.ManagedObjectReference
}

func (h *hangLock) Reference() types.ManagedObjectReference { return h.Self }

var hangSeq atomic.Int64

// startTask runs body as a task on entity and returns the task. With hold
// nil it is an ordinary vcsim task. Otherwise the task is running at once
// and stays so until hold is closed (DELETE /_sim/faults); then body runs
// under the entity's lock as it would have, and the task finishes with its
// result.
func startTask(ctx *simulator.Context, entity mo.Reference, name string, hold <-chan struct{},
	body func(*simulator.Task) (types.AnyType, types.BaseMethodFault)) types.ManagedObjectReference {
	if hold == nil {
		return simulator.CreateTask(entity, name, body).Run(ctx)
	}
	ref := entity.Reference()
	waiter := &hangLock{Self: types.ManagedObjectReference{Type: "GpupoolHang", Value: fmt.Sprintf("hang-%d", hangSeq.Add(1))}}
	task := simulator.CreateTask(waiter, name, func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
		<-hold
		var res types.AnyType
		var fault types.BaseMethodFault
		ctx.WithLock(entity, func() { res, fault = body(t) })
		return res, fault
	})
	self := task.Run(ctx)
	ctx.Map.AtomicUpdate(ctx, task, []types.PropertyChange{
		{Name: "info.entity", Val: ref},
		{Name: "info.entityName", Val: entityName(ctx, entity)},
		{Name: "info.descriptionId", Val: ref.Type + "." + name},
	})
	return self
}

// entityName reads the name of an inventory object.
func entityName(ctx *simulator.Context, obj mo.Reference) string {
	name := obj.Reference().Value
	if e, ok := obj.(mo.Entity); ok {
		ctx.WithLock(obj, func() { name = e.Entity().Name })
	}
	return name
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

// vmFault takes the injected fault for (VM, op) at call time, like hostFault.
func vmFault(vm *simulator.VirtualMachine, op string) (fail string, hold <-chan struct{}) {
	f := sim.takeFaultEntry("vm:" + vm.Name + "/" + op)
	switch {
	case f == nil:
		return "", nil
	case f.Hang:
		return "", sim.hold()
	default:
		return f.Message, nil
	}
}

// faultedPowerTask answers a power operation that has an injected fault: a
// task that fails with the message, or one that hangs until the faults are
// cleared and then runs the operation (start) and finishes with its result.
func faultedPowerTask(ctx *simulator.Context, vm *simulator.VirtualMachine, name, fail string, hold <-chan struct{},
	start func() soap.HasFault) types.ManagedObjectReference {
	return startTask(ctx, vm, name, hold, func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
		if fail != "" {
			return nil, simFault(&types.GenericVmConfigFault{Reason: fail}, "%s", fail)
		}
		res := start()
		if f := res.Fault(); f != nil {
			return nil, f.VimFault().(types.BaseMethodFault)
		}
		inner, ok := ctx.Map.Get(powerTaskRef(res)).(*simulator.Task)
		if !ok {
			return nil, nil
		}
		inner.Wait()
		var result types.AnyType
		var fault types.BaseMethodFault
		ctx.Map.WithLock(&simulator.Context{}, inner, func() {
			result = inner.Info.Result
			if inner.Info.Error != nil {
				fault = inner.Info.Error.Fault
			}
		})
		return result, fault
	})
}

func powerTaskRef(res soap.HasFault) types.ManagedObjectReference {
	switch b := res.(type) {
	case *methods.PowerOnVM_TaskBody:
		return b.Res.Returnval
	case *methods.PowerOffVM_TaskBody:
		return b.Res.Returnval
	}
	return types.ManagedObjectReference{}
}

func (v *vmOps) PowerOnVMTask(ctx *simulator.Context, req *types.PowerOnVM_Task) soap.HasFault {
	vm := v.vm
	if fail, hold := vmFault(vm, "power_on"); fail != "" || hold != nil {
		task := faultedPowerTask(ctx, vm, "powerOn", fail, hold, func() soap.HasFault { return v.powerOn(ctx, req) })
		return &methods.PowerOnVM_TaskBody{Res: &types.PowerOnVM_TaskResponse{Returnval: task}}
	}
	return v.powerOn(ctx, req)
}

// powerOn checks the VM's vGPU profiles against its host, then powers it on.
func (v *vmOps) powerOn(ctx *simulator.Context, req *types.PowerOnVM_Task) soap.HasFault {
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
	// A host that failed (ha_failover.go) powers nothing on; HA admission
	// control refuses a power-on that would reserve the failover capacity.
	var state0 types.VirtualMachinePowerState
	ctx.WithLock(vm, func() { state0 = vm.Runtime.PowerState })
	if state0 != types.VirtualMachinePowerStatePoweredOn {
		var fault types.BaseMethodFault
		var on *gpuHost
		if vm.Runtime.Host != nil {
			on = sim.hostOf(*vm.Runtime.Host)
		}
		if on != nil && hostFailed(on.spec.Name) {
			fault = simFault(&types.InvalidState{}, "host %s of VM %s is not responding", on.spec.Name, vm.Name)
		} else {
			fault = haAdmission(ctx, vm)
		}
		if fault != nil {
			task := simulator.CreateTask(vm, "powerOn", func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
				return nil, fault
			})
			return &methods.PowerOnVM_TaskBody{Res: &types.PowerOnVM_TaskResponse{Returnval: task.Run(ctx)}}
		}
	}
	// Place every vGPU of the VM on a GPU of its host (placement.go) before it
	// powers on; no GPU fits: the task fails, as vCenter's does.
	var placedOn *gpuHost
	var state types.VirtualMachinePowerState
	ctx.WithLock(vm, func() { state = vm.Runtime.PowerState })
	if profiles := vmProfiles(vm); len(profiles) > 0 && vm.Runtime.Host != nil && state != types.VirtualMachinePowerStatePoweredOn {
		if g := sim.hostOf(*vm.Runtime.Host); g != nil && g.spec.GPUCount > 0 {
			sim.mu.Lock()
			_, err := g.place(vm.Self, vm.Name, profiles)
			sim.mu.Unlock()
			if err != nil {
				msg := err.Error()
				task := simulator.CreateTask(vm, "powerOn", func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
					return nil, simFault(&types.InsufficientResourcesFault{}, "%s", msg)
				})
				return &methods.PowerOnVM_TaskBody{Res: &types.PowerOnVM_TaskResponse{Returnval: task.Run(ctx)}}
			}
			placedOn = g
			sim.render(ctx, g) // graphicsInfo[].vm shows the placement at once
		}
	}
	var res soap.HasFault
	ctx.WithLock(vm, func() { res = vm.PowerOnVMTask(ctx, req) })
	if placedOn != nil && res.Fault() != nil {
		sim.mu.Lock()
		placedOn.release(vm.Self)
		sim.mu.Unlock()
	}
	v.afterPower(ctx, res)
	return res
}

func (v *vmOps) PowerOffVMTask(ctx *simulator.Context, req *types.PowerOffVM_Task) soap.HasFault {
	vm := v.vm
	off := func() soap.HasFault {
		// The VM's vGPUs leave their GPUs as it powers off.
		if vm.Runtime.Host != nil {
			if g := sim.hostOf(*vm.Runtime.Host); g != nil {
				sim.mu.Lock()
				held := g.release(vm.Self)
				sim.mu.Unlock()
				if held {
					sim.render(ctx, g)
				}
			}
		}
		var res soap.HasFault
		ctx.WithLock(vm, func() { res = vm.PowerOffVMTask(ctx, req) })
		v.afterPower(ctx, res)
		return res
	}
	if fail, hold := vmFault(vm, "power_off"); fail != "" || hold != nil {
		task := faultedPowerTask(ctx, vm, "powerOff", fail, hold, off)
		return &methods.PowerOffVM_TaskBody{Res: &types.PowerOffVM_TaskResponse{Returnval: task}}
	}
	return off()
}

// afterPower waits for a power task of a vGPU VM to finish, then drops the
// VM's placement if it is not powered on (a power-off, or a power-on that
// failed) and re-renders the host's graphicsInfo.
func (v *vmOps) afterPower(ctx *simulator.Context, res soap.HasFault) {
	vm := v.vm
	if vm.Runtime.Host == nil {
		return
	}
	g := sim.hostOf(*vm.Runtime.Host)
	if g == nil || len(vmProfiles(vm)) == 0 {
		return
	}
	reg := ctx.Map
	done := func() {
		c := &simulator.Context{Context: context.Background(), Map: reg}
		sim.releaseIfOff(c, vm, g)
		sim.render(c, g)
	}
	if res.Fault() != nil {
		go done()
		return
	}
	inner, ok := reg.Get(powerTaskRef(res)).(*simulator.Task)
	go func() {
		if ok {
			inner.Wait()
		}
		done()
	}()
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
