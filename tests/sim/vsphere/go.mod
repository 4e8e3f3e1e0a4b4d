module gpupool.vcf/tests/sim/vsphere

go 1.24.0

require (
	github.com/vmware/govmomi v0.52.0
	golang.org/x/crypto v0.45.0
	gopkg.in/yaml.v3 v3.0.1
)

require github.com/google/uuid v1.6.0 // indirect
