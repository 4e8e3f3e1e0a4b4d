package main

// Building the vCenter inventory from the fleet: datacenter, clusters, hosts
// (with their GPU managers), one shared local datastore, VMs with vGPUs.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"
)

// buildInventory creates the fleet through the in-process client (the same
// API calls a user would make), then attaches the GPU state to each host.
func buildInventory(model *simulator.Model, f *fleetFile, hosts []hostSpec, vms []vmSpec) error {
	ctx := context.Background()
	reg := model.Map()
	sctx := &simulator.Context{Context: ctx, Map: reg}
	c, err := vim25.NewClient(ctx, model.Service)
	if err != nil {
		return err
	}
	root := object.NewRootFolder(c)
	dc, err := root.CreateDatacenter(ctx, f.Datacenter)
	if err != nil {
		return err
	}
	folders, err := dc.Folders(ctx)
	if err != nil {
		return err
	}

	clusters := map[string]*object.ClusterComputeResource{}
	for _, fc := range f.Clusters {
		cl, err := folders.HostFolder.CreateCluster(ctx, fc.Name, types.ClusterConfigSpecEx{
			DrsConfig: &types.ClusterDrsConfigInfo{Enabled: types.NewBool(true), DefaultVmBehavior: types.DrsBehaviorFullyAutomated},
		})
		if err != nil {
			return fmt.Errorf("cluster %s: %w", fc.Name, err)
		}
		clusters[fc.Name] = cl
		// lifecycleManaged: whether vLCM manages the cluster with a single image (vlcm.go)
		if obj, ok := reg.Get(cl.Reference()).(*simulator.ClusterComputeResource); ok {
			managed := fc.Lifecycle == "vlcm"
			sctx.WithLock(obj, func() { obj.LifecycleManaged = &managed })
		}
		sim.clusters[fc.Name] = cl.Reference()
		sim.supervisors[cl.Reference().Value] = fc.Supervisor
	}

	var hostObjs []*object.HostSystem
	hostByName := map[string]*object.HostSystem{}
	clusterHosts := map[string][]string{}
	for _, hs := range hosts {
		task, err := clusters[hs.Cluster].AddHost(ctx, types.HostConnectSpec{HostName: hs.Name}, true, nil, nil)
		if err != nil {
			return err
		}
		info, err := task.WaitForResult(ctx, nil)
		if err != nil {
			return fmt.Errorf("host %s: %w", hs.Name, err)
		}
		ref := info.Result.(types.ManagedObjectReference)
		h := object.NewHostSystem(c, ref)
		hostObjs = append(hostObjs, h)
		hostByName[hs.Name] = h
		clusterHosts[hs.Cluster] = append(clusterHosts[hs.Cluster], hs.Name)
		attachGPU(sctx, reg, hs, ref)
	}

	// One local datastore shared by all hosts (vcsim backs it with a folder
	// under its home, which Model.Remove deletes).
	if len(hostObjs) > 0 {
		home := ""
		for _, o := range reg.OptionManager().Setting {
			if v := o.GetOptionValue(); v.Key == "vcsim.home" {
				home = v.Value.(string)
			}
		}
		dir := filepath.Join(home, f.Datacenter+"-LocalDS_0")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		for _, h := range hostObjs {
			dss, err := h.ConfigManager().DatastoreSystem(ctx)
			if err != nil {
				return err
			}
			if _, err := dss.CreateLocalDatastore(ctx, "LocalDS_0", dir); err != nil {
				return err
			}
		}
	}

	rr := map[string]int{}
	for _, v := range vms {
		hostName := v.Host
		cluster := ""
		if hostName == "" {
			names := clusterHosts[v.Cluster]
			if len(names) == 0 {
				return fmt.Errorf("vm %s: cluster %s has no hosts", v.Name, v.Cluster)
			}
			hostName = names[rr[v.Cluster]%len(names)]
			rr[v.Cluster]++
		}
		for _, hs := range hosts {
			if hs.Name == hostName {
				cluster = hs.Cluster
			}
		}
		pool, err := clusters[cluster].ResourcePool(ctx)
		if err != nil {
			return err
		}
		if err := createVM(ctx, folders.VmFolder, pool, hostByName[hostName], v); err != nil {
			return fmt.Errorf("vm %s: %w", v.Name, err)
		}
	}

	for _, g := range sim.hosts {
		sim.render(sctx, g)
	}
	return nil
}

// attachGPU records the host's GPU state and points its configManager at
// the GPU managers.
func attachGPU(ctx *simulator.Context, reg *simulator.Registry, hs hostSpec, ref types.ManagedObjectReference) {
	host := reg.Get(ref).(*simulator.HostSystem)
	g := &gpuHost{spec: hs, ref: ref, installed: hs.Driver, running: hs.Driver,
		nvidiaOptions: hs.NvidiaOptions, nvidiaOptionsLoaded: hs.NvidiaOptions}
	g.graphics = types.HostGraphicsConfig{HostDefaultGraphicsType: hs.GraphicsType, SharedPassthruAssignmentPolicy: hs.Policy}
	for _, id := range g.gpuPciIDs() {
		g.graphics.DeviceType = append(g.graphics.DeviceType, types.HostGraphicsConfigDeviceType{DeviceId: id, GraphicsType: hs.GraphicsType})
	}
	if hs.Model == nil {
		g.installed, g.running = "", "" // no GPU, no NVIDIA driver
	}
	g.ensureGPUState()
	for i := range g.mig {
		g.mig[i] = gpuMig{Current: hs.MIG[i], Pending: hs.MIG[i]}
		g.vgpuMode[i] = hs.VgpuMode
	}
	g.sshRunning, g.sshPolicy = hs.SSHRunning, "off"
	g.lockdown = types.HostLockdownMode(hs.Lockdown)
	g.lockdownExceptions = hs.Exceptions

	// Managed object ids follow the host's: hostgraphicsmanager-host-21 and so on.
	id := func(kind string) types.ManagedObjectReference {
		return types.ManagedObjectReference{Type: kind, Value: strings.ToLower(kind) + "-" + ref.Value}
	}
	g.graphicsMgr = &GraphicsManager{host: g}
	g.graphicsMgr.Self = id("HostGraphicsManager")
	g.kernelMgr = &KernelModuleSystem{host: g}
	g.kernelMgr.Self = id("HostKernelModuleSystem")
	g.imageMgr = &ImageConfigManager{host: g}
	g.imageMgr.Self = id("HostImageConfigManager")
	g.patchMgr = &PatchManager{host: g}
	g.patchMgr.Self = id("HostPatchManager")
	g.serviceSys = &ServiceSystem{host: g}
	g.serviceSys.Self = id("HostServiceSystem")
	g.serviceSys.ServiceInfo = g.serviceInfo()
	g.accessMgr = &AccessManager{host: g}
	g.accessMgr.Self = id("HostAccessManager")
	g.accessMgr.LockdownMode = g.lockdown
	gm := reg.Put(g.graphicsMgr).Reference()
	ss := reg.Put(g.serviceSys).Reference()
	am := reg.Put(g.accessMgr).Reference()
	km := reg.Put(g.kernelMgr).Reference()
	im := reg.Put(g.imageMgr).Reference()
	pm := reg.Put(g.patchMgr).Reference()

	ctx.WithLock(host, func() {
		host.ConfigManager.GraphicsManager = &gm
		host.ConfigManager.KernelModuleSystem = &km
		host.ConfigManager.ImageConfigManager = &im
		host.ConfigManager.PatchManager = &pm
		host.ConfigManager.ServiceSystem = &ss
		host.ConfigManager.HostAccessManager = &am

		// Hardware is shared with vcsim's template: give the host its own
		// copy with the GPUs added to the devices vcsim already has.
		hw := *host.Hardware
		hw.PciDevice = append(append([]types.HostPciDevice(nil), host.Hardware.PciDevice...), g.pciDevices()...)
		host.Hardware = &hw
		haHostHardware(&hw, host.Summary.Hardware) // a GPU server's cores and memory (ha_failover.go)
		host.Runtime.InMaintenanceMode = hs.Maintenance
	})

	sim.mu.Lock()
	sim.hosts[hs.Name] = g
	sim.byRef[ref] = g
	sim.mu.Unlock()
}

// createVM creates one VM with its vGPU devices and powers it on if asked.
func createVM(ctx context.Context, vmFolder *object.Folder, pool *object.ResourcePool, host *object.HostSystem, v vmSpec) error {
	spec := types.VirtualMachineConfigSpec{
		Name:     v.Name,
		GuestId:  string(types.VirtualMachineGuestOsIdentifierUbuntu64Guest),
		NumCPUs:  8,
		MemoryMB: 65536,
		Files:    &types.VirtualMachineFileInfo{VmPathName: "[LocalDS_0]"},
	}
	if len(v.VGPU) > 0 {
		spec.MemoryReservationLockedToMax = types.NewBool(true)
	}
	for i, p := range v.VGPU {
		spec.DeviceChange = append(spec.DeviceChange, &types.VirtualDeviceConfigSpec{
			Operation: types.VirtualDeviceConfigSpecOperationAdd,
			Device: &types.VirtualPCIPassthrough{VirtualDevice: types.VirtualDevice{
				Key:     int32(-100 - i),
				Backing: &types.VirtualPCIPassthroughVmiopBackingInfo{Vgpu: p},
			}},
		})
	}
	task, err := vmFolder.CreateVM(ctx, spec, pool, host)
	if err != nil {
		return err
	}
	info, err := task.WaitForResult(ctx, nil)
	if err != nil {
		return err
	}
	if !v.PowerOn {
		return nil
	}
	vm := object.NewVirtualMachine(vmFolder.Client(), info.Result.(types.ManagedObjectReference))
	task, err = vm.PowerOn(ctx)
	if err != nil {
		return err
	}
	_, err = task.WaitForResult(ctx, nil)
	return err
}
