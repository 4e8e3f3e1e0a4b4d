package main

// Per-host GPU state and how it shows in the vSphere inventory: PCI devices,
// graphics info, shared GPU capabilities (vGPU profiles) and the host-level
// managed objects vcsim does not have.

import (
	"fmt"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// gpuHost is the simulator's view of one ESXi host's GPU side.
// Fields are guarded by sim.mu.
type gpuHost struct {
	spec hostSpec
	ref  types.ManagedObjectReference

	// installed is the NVIDIA host driver VIB version on disk (what
	// FetchSoftwarePackages reports); running is the version the kernel
	// loaded at the last boot (what vGPU profiles and QueryModules follow).
	installed      string
	running        string
	rebootRequired bool
	rebootCount    int
	// rebooting is true from a reboot until the host is back; hung keeps
	// it notResponding after a reboot until released (fault reboot_hang).
	rebooting bool
	hung      bool

	graphics types.HostGraphicsConfig
	// nvidiaOptions is the configured nvidia module option string (what
	// QueryConfiguredModuleOptionString returns); nvidiaOptionsLoaded is the
	// string the module was loaded with at the last boot.
	nvidiaOptions       string
	nvidiaOptionsLoaded string

	// Per GPU (index as in gpuPciIDs): MIG mode (current and pending, what
	// nvidia-smi shows; mig_ssh.go), the configured vGPU mode (sameSize or
	// mixedSize), and the vGPUs of powered-on VMs placed on it (placement.go).
	mig      []gpuMig
	vgpuMode []string
	placed   [][]placedVGPU

	// The TSM-SSH service and lockdown mode (services.go).
	sshRunning         bool
	sshPolicy          string
	lockdown           types.HostLockdownMode
	lockdownExceptions []string

	graphicsMgr *GraphicsManager
	kernelMgr   *KernelModuleSystem
	imageMgr    *ImageConfigManager
	patchMgr    *PatchManager
	serviceSys  *ServiceSystem
	accessMgr   *AccessManager
}

// gpuPciIDs lists the PCI ids of the host's GPUs.
func (g *gpuHost) gpuPciIDs() []string {
	ids := make([]string, g.spec.GPUCount)
	for i := range ids {
		ids[i] = pciID(gpuBus(i))
	}
	return ids
}

// offered returns the vGPU profiles the host can run now: none without a GPU
// or without a loaded NVIDIA driver (that is how real hosts behave).
func (g *gpuHost) offered() []vgpuProfile {
	if g.spec.Model == nil || g.running == "" {
		return nil
	}
	return g.spec.Model.profiles()
}

func (g *gpuHost) offers(profile string) bool {
	for _, p := range g.offered() {
		if p.Name == profile {
			return true
		}
	}
	return false
}

// pciDevices returns one HostPciDevice per GPU.
func (g *gpuHost) pciDevices() []types.HostPciDevice {
	var out []types.HostPciDevice
	if g.spec.Model == nil {
		return out
	}
	for i := 0; i < g.spec.GPUCount; i++ {
		bus := gpuBus(i)
		out = append(out, types.HostPciDevice{
			Id:              pciID(bus),
			ClassId:         0x0302, // 3D controller
			Bus:             byte(bus),
			Slot:            0,
			Function:        0,
			VendorId:        int16(nvidiaVendorID),
			SubVendorId:     int16(nvidiaVendorID),
			VendorName:      "NVIDIA Corporation",
			DeviceId:        int16(g.spec.Model.DeviceID),
			SubDeviceId:     int16(0x1600 + g.spec.Model.DeviceID&0xff),
			DeviceName:      g.spec.Model.PciName,
			DeviceClassName: "3D controller",
		})
	}
	return out
}

// graphicsInfo returns HostGraphicsInfo per GPU; vms maps a GPU index to the
// powered-on vGPU VMs placed on it. Call with sim.mu held.
func (g *gpuHost) graphicsInfo(vms map[int][]types.ManagedObjectReference) []types.HostGraphicsInfo {
	var out []types.HostGraphicsInfo
	if g.spec.Model == nil {
		return out
	}
	for i, id := range g.gpuPciIDs() {
		out = append(out, types.HostGraphicsInfo{
			DeviceName:     g.spec.Model.DisplayName,
			VendorName:     "NVIDIA Corporation",
			PciId:          id,
			GraphicsType:   g.deviceGraphicsType(id),
			MemorySizeInKB: int64(g.spec.Model.MemoryGB) * 1024 * 1024,
			VgpuMode:       g.shownVgpuMode(i),
			Vm:             vms[i],
		})
	}
	return out
}

// deviceGraphicsType is the configured type of one GPU, or the host default.
func (g *gpuHost) deviceGraphicsType(id string) string {
	for _, d := range g.graphics.DeviceType {
		if d.DeviceId == id {
			return d.GraphicsType
		}
	}
	return g.graphics.HostDefaultGraphicsType
}

func (g *gpuHost) sharedGpuCapabilities() []types.HostSharedGpuCapabilities {
	var out []types.HostSharedGpuCapabilities
	for _, p := range g.offered() {
		out = append(out, types.HostSharedGpuCapabilities{
			Vgpu:                    p.Name,
			DiskSnapshotSupported:   true,
			MemorySnapshotSupported: p.Sharing == "timeSliced",
			SuspendSupported:        p.Sharing == "timeSliced",
			MigrateSupported:        true,
		})
	}
	return out
}

func (g *gpuHost) sharedPassthruGpuTypes() []string {
	var out []string
	for _, p := range g.offered() {
		out = append(out, p.Name)
	}
	return out
}

// sim holds every piece of state the simulator adds to vcsim's model.
type simState struct {
	mu     sync.Mutex
	reg    *simulator.Registry
	hosts  map[string]*gpuHost
	byRef  map[types.ManagedObjectReference]*gpuHost
	faults map[string]*injectedFault // key: host + "/" + op, or "vm:" + VM name + "/" + op
	// release is closed (and replaced) when the faults are cleared: hung
	// tasks wait on the channel they were started with.
	release chan struct{}

	clusters    map[string]types.ManagedObjectReference
	supervisors map[string]bool // cluster moref value -> Supervisor-enabled

	rebootDelay time.Duration
}

type injectedFault struct {
	Message string
	Times   int
	Hang    bool
}

var sim = &simState{
	hosts:       map[string]*gpuHost{},
	byRef:       map[types.ManagedObjectReference]*gpuHost{},
	faults:      map[string]*injectedFault{},
	release:     make(chan struct{}),
	clusters:    map[string]types.ManagedObjectReference{},
	supervisors: map[string]bool{},
}

// takeFault consumes one injected fault for (host, op), if any.
func (s *simState) takeFault(host, op string) (string, bool) {
	f := s.takeFaultEntry(host + "/" + op)
	if f == nil {
		return "", false
	}
	return f.Message, true
}

// takeFaultEntry consumes one use of the fault stored under key and
// returns a copy of it, or nil. A hanging fault also returns the channel
// its task waits on (closed when the faults are cleared).
func (s *simState) takeFaultEntry(key string) *injectedFault {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.faults[key]
	if !ok {
		return nil
	}
	f.Times--
	if f.Times <= 0 {
		delete(s.faults, key)
	}
	c := *f
	return &c
}

// hold returns the channel that hung tasks wait on.
func (s *simState) hold() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.release
}

// clearFaults drops every host and VM fault, lets hung tasks finish and
// brings back hosts held by reboot_hang.
func (s *simState) clearFaults() {
	s.mu.Lock()
	s.faults = map[string]*injectedFault{}
	close(s.release)
	s.release = make(chan struct{})
	var hung []*gpuHost
	for _, g := range s.hosts {
		if g.hung {
			g.hung = false
			hung = append(hung, g)
		}
	}
	s.mu.Unlock()
	for _, g := range hung {
		go s.finishReboot(s.reg, s.reg.Get(g.ref).(*simulator.HostSystem), g, 0)
	}
}

// simFault builds a fault whose message reaches the client both as the SOAP
// faultstring / task error message and in faultMessage.
func simFault(fault types.BaseMethodFault, format string, args ...any) types.BaseMethodFault {
	msg := fmt.Sprintf(format, args...)
	fault.GetMethodFault().FaultMessage = []types.LocalizableMessage{{Key: "gpupool.sim", Message: msg}}
	return fault
}

func faultMessage(f types.BaseMethodFault) string {
	if f == nil {
		return ""
	}
	if m := f.GetMethodFault().FaultMessage; len(m) > 0 {
		return m[0].Message
	}
	return fmt.Sprintf("%T", f)
}

// render copies the host's GPU state into the HostSystem and the graphics
// manager. It locks the host, then the manager, one after the other (never
// nested), so it cannot deadlock with a task that holds the host lock.
func (s *simState) render(ctx *simulator.Context, g *gpuHost) {
	s.mu.Lock()
	g.ensureGPUState()
	vms := g.vmsByGPU()
	caps := g.sharedGpuCapabilities()
	info := g.graphicsInfo(vms)
	types_ := g.sharedPassthruGpuTypes()
	cfg := g.graphics
	cfg.DeviceType = append([]types.HostGraphicsConfigDeviceType(nil), g.graphics.DeviceType...)
	for i := range cfg.DeviceType {
		for j, id := range g.gpuPciIDs() {
			if cfg.DeviceType[i].DeviceId == id {
				cfg.DeviceType[i].VgpuMode = g.vgpuMode[j]
			}
		}
	}
	reboot := g.rebootRequired
	services := g.serviceInfo()
	lockdown := g.lockdown
	s.mu.Unlock()

	host := ctx.Map.Get(g.ref).(*simulator.HostSystem)
	ctx.WithLock(host, func() {
		host.Config.SharedGpuCapabilities = caps
		host.Config.GraphicsInfo = info
		host.Config.SharedPassthruGpuTypes = types_
		c := cfg
		host.Config.GraphicsConfig = &c
		host.Summary.RebootRequired = reboot
		sv := services
		host.Config.Service = &sv
		host.Config.LockdownMode = lockdown
	})
	if ss := g.serviceSys; ss != nil {
		ctx.WithLock(ss, func() { ss.ServiceInfo = services })
	}
	if am := g.accessMgr; am != nil {
		ctx.WithLock(am, func() { am.LockdownMode = lockdown })
	}
	gm := g.graphicsMgr
	ctx.WithLock(gm, func() {
		gm.SharedGpuCapabilities = caps
		gm.GraphicsInfo = info
		gm.SharedPassthruGpuTypes = types_
		c := cfg
		gm.GraphicsConfig = &c
	})
}

// vmProfiles lists the vGPU profiles of a VM's devices.
func vmProfiles(vm *simulator.VirtualMachine) []string {
	var out []string
	if vm.Config == nil {
		return out
	}
	for _, d := range vm.Config.Hardware.Device {
		if p, ok := d.(*types.VirtualPCIPassthrough); ok {
			if b, ok := p.Backing.(*types.VirtualPCIPassthroughVmiopBackingInfo); ok && b.Vgpu != "" {
				out = append(out, b.Vgpu)
			}
		}
	}
	return out
}

// hostOf returns the GPU state of a host reference; it ignores serverGuid,
// which clients may send along with the reference.
func (s *simState) hostOf(ref types.ManagedObjectReference) *gpuHost {
	return s.byRef[types.ManagedObjectReference{Type: ref.Type, Value: ref.Value}]
}
