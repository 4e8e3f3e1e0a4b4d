package main

// Custom attributes (CustomFieldsManager) as vCenter keeps them. vcsim's own
// manager stores definitions and values and returns them through the
// PropertyCollector, but: it puts the managed object type in a definition's
// `type` (vCenter: the value type, "string"; pyvmomi cannot read a global
// definition back), it lists a definition in `availableField` only of the
// entities that exist when it is added, and its SetField accepts a field of
// another object type and panics on an unknown entity. The methods are
// routed here through the dispatch hook; values stay in vcsim's fields.

import (
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// fieldDefs mirrors the definitions for entities added later (PutObject
// runs under other objects' locks, so it must not take the manager's).
var fieldDefs struct {
	sync.Mutex
	defs []types.CustomFieldDef
}

type customFieldOps struct {
	Self types.ManagedObjectReference
	cfm  *simulator.CustomFieldsManager
}

func (c *customFieldOps) Reference() types.ManagedObjectReference { return c.Self }

// fieldApplies tells whether a definition for moType applies to entities of kind.
func fieldApplies(moType, kind string) bool {
	return moType == "" || moType == "ManagedEntity" || moType == kind ||
		(moType == "ComputeResource" && kind == "ClusterComputeResource")
}

func (c *customFieldOps) mirror() {
	fieldDefs.Lock()
	fieldDefs.defs = append([]types.CustomFieldDef(nil), c.cfm.Field...)
	fieldDefs.Unlock()
}

func (c *customFieldOps) AddCustomFieldDef(ctx *simulator.Context, req *types.AddCustomFieldDef) soap.HasFault {
	body := new(methods.AddCustomFieldDefBody)
	var def types.CustomFieldDef
	dup := false
	ctx.WithLock(c.cfm, func() {
		key := int32(100)
		for _, f := range c.cfm.Field {
			if f.Name == req.Name && (f.ManagedObjectType == "" || req.MoType == "" || f.ManagedObjectType == req.MoType) {
				dup = true
				return
			}
			if f.Key > key {
				key = f.Key
			}
		}
		def = types.CustomFieldDef{
			Key: key + 1, Name: req.Name, Type: "string", ManagedObjectType: req.MoType,
			FieldDefPrivileges: req.FieldDefPolicy, FieldInstancePrivileges: req.FieldPolicy,
		}
		c.cfm.Field = append(c.cfm.Field, def)
		c.mirror()
	})
	if dup {
		body.Fault_ = simulator.Fault("The name '"+req.Name+"' already exists.",
			&types.DuplicateName{Name: req.Name, Object: c.cfm.Reference()})
		return body
	}
	for _, e := range ctx.Map.All("") {
		if !fieldApplies(req.MoType, e.Reference().Type) {
			continue
		}
		ctx.WithLock(e, func() { addAvailableField(e.Entity(), def) })
	}
	body.Res = &types.AddCustomFieldDefResponse{Returnval: def}
	return body
}

func addAvailableField(e *mo.ManagedEntity, def types.CustomFieldDef) {
	for _, f := range e.AvailableField {
		if f.Key == def.Key {
			return
		}
	}
	e.AvailableField = append(e.AvailableField, def)
}

func (c *customFieldOps) RemoveCustomFieldDef(ctx *simulator.Context, req *types.RemoveCustomFieldDef) soap.HasFault {
	var res soap.HasFault
	ctx.WithLock(c.cfm, func() {
		res = c.cfm.RemoveCustomFieldDef(ctx, req)
		c.mirror()
	})
	return res
}

func (c *customFieldOps) RenameCustomFieldDef(ctx *simulator.Context, req *types.RenameCustomFieldDef) soap.HasFault {
	var res soap.HasFault
	ctx.WithLock(c.cfm, func() {
		res = c.cfm.RenameCustomFieldDef(ctx, req)
		c.mirror()
	})
	return res
}

func (c *customFieldOps) SetField(ctx *simulator.Context, req *types.SetField) soap.HasFault {
	body := new(methods.SetFieldBody)
	var def *types.CustomFieldDef
	ctx.WithLock(c.cfm, func() {
		for i := range c.cfm.Field {
			if c.cfm.Field[i].Key == req.Key {
				d := c.cfm.Field[i]
				def = &d
			}
		}
	})
	if def == nil {
		body.Fault_ = simulator.Fault("A specified parameter was not correct: key", &types.InvalidArgument{InvalidProperty: "key"})
		return body
	}
	ref := types.ManagedObjectReference{Type: req.Entity.Type, Value: req.Entity.Value}
	if _, ok := ctx.Map.Get(ref).(mo.Entity); !ok {
		body.Fault_ = simulator.Fault("The object has already been deleted or has not been completely created",
			&types.ManagedObjectNotFound{Obj: req.Entity})
		return body
	}
	if !fieldApplies(def.ManagedObjectType, ref.Type) {
		body.Fault_ = simulator.Fault("A specified parameter was not correct: entity", &types.InvalidArgument{InvalidProperty: "entity"})
		return body
	}
	r := *req
	r.Entity = ref
	return c.cfm.SetField(ctx, &r)
}

// newEntityFields lists the custom field definitions on entities created
// after the definitions (vCenter computes availableField from the type).
type newEntityFields struct {
	Self types.ManagedObjectReference
}

func (n *newEntityFields) Reference() types.ManagedObjectReference                               { return n.Self }
func (n *newEntityFields) UpdateObject(*simulator.Context, mo.Reference, []types.PropertyChange) {}
func (n *newEntityFields) RemoveObject(*simulator.Context, types.ManagedObjectReference)         {}

func (n *newEntityFields) PutObject(_ *simulator.Context, obj mo.Reference) {
	e, ok := obj.(mo.Entity)
	if !ok {
		return
	}
	fieldDefs.Lock()
	defs := fieldDefs.defs
	fieldDefs.Unlock()
	for _, def := range defs {
		if fieldApplies(def.ManagedObjectType, obj.Reference().Type) {
			addAvailableField(e.Entity(), def)
		}
	}
}
