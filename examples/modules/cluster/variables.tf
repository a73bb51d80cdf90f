# The cluster role's contract inputs (v1alpha1), as the generated root passes them.

variable "captf_contract" {
  type = string
}

variable "captf_cluster" {
  type = object({ name = string, namespace = string })
}

variable "captf_object" {
  type = object({ kind = string, name = string, namespace = string })
}

variable "captf_tags" {
  type = map(string)
}

# Never passed to a cluster; declared with a default so the module can also be
# reused where it is.
variable "captf_cluster_outputs" {
  type    = any
  default = null
}

# Non-null: an endpoint someone else owns (the user, a hosted control plane).
variable "control_plane_endpoint" {
  type    = object({ host = string, port = number })
  default = null
}

variable "kubernetes_version" {
  type    = string
  default = null
}

variable "control_plane_initialized" {
  type = bool
}

variable "cluster_network" {
  type = object({
    pods            = list(string)
    services        = list(string)
    service_domain  = string
    api_server_port = number
  })
  default = null
}

# User variables: what an object may set in spec.variables. Each has a default,
# so the module plans when nobody sets it.

# Where this module's "load balancer" listens when no endpoint is given.
variable "endpoint_host" {
  type    = string
  default = "127.0.0.1"
}

variable "endpoint_port" {
  type    = number
  default = 6443
}

variable "zones" {
  type    = list(string)
  default = ["zone-a", "zone-b"]
}
