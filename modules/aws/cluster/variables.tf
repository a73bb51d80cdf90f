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

# Never passed to a cluster.
variable "captf_cluster_outputs" {
  type    = any
  default = null
}

# Non-null: an endpoint someone else owns; then no load balancer is made.
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

# What a team sets in spec.variables; each has a default.

variable "region" {
  description = "The AWS region; null takes AWS_REGION from the identity's environment."
  type        = string
  default     = null
}

variable "max_retries" {
  description = "How often the provider retries a throttled or failed call; null is its default (25)."
  type        = number
  default     = null
}

variable "assume_role_arn" {
  description = "A role the identity's credentials assume before any call; null uses them as they are."
  type        = string
  default     = null
}

variable "tags" {
  description = "Tags on every resource, beside the contract's captf.io/* tags (which win)."
  type        = map(string)
  default     = {}
}

variable "vpc_cidr" {
  description = "The VPC's address range; each zone's subnet is a /24 of it (newbits 8)."
  type        = string
  default     = "10.0.0.0/16"
}

variable "availability_zones" {
  description = "The zones to use, each a failure domain; [] takes the first zone_count of the region."
  type        = list(string)
  default     = []
}

variable "zone_count" {
  description = "How many of the region's zones to use when availability_zones is []."
  type        = number
  default     = 3
}

variable "api_server_cidrs" {
  description = "Who may reach the API server through the load balancer."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

variable "internal_load_balancer" {
  description = "Whether the API server's load balancer is internal to the VPC."
  type        = bool
  default     = false
}
