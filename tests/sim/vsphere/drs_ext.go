package main

// DRS defaults of a real vCenter that vcsim leaves unset: per-VM DRS overrides
// are allowed on a new cluster (drsConfig.enableVmBehaviorOverrides = true).
// vcsim's ReconfigureComputeResource_Task does not change that flag, and
// modules such as vmware.vmware.cluster_drs_vm_overrides refuse to run
// without it. Set once when the server starts, after the fleet is built.

import (
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

func init() {
	simulator.RegisterEndpoint(func(_ *simulator.Service, r *simulator.Registry) {
		for _, obj := range r.All("ClusterComputeResource") {
			cl, ok := obj.(*simulator.ClusterComputeResource)
			if !ok {
				continue
			}
			cfg, ok := cl.ConfigurationEx.(*types.ClusterConfigInfoEx)
			if !ok {
				continue
			}
			if cfg.DrsConfig.EnableVmBehaviorOverrides == nil {
				cfg.DrsConfig.EnableVmBehaviorOverrides = types.NewBool(true)
			}
		}
	})
}
