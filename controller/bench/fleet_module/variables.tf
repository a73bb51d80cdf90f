# The machine role's contract inputs (v1alpha1), as the generated root passes them.

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

# The cluster module's exports.
variable "captf_cluster_outputs" {
  type    = any
  default = null
}

variable "machine_name" {
  type = string
}

# Base64 of the bootstrap Secret's value: opaque, never parsed.
variable "bootstrap_data" {
  type      = string
  sensitive = true
}

variable "bootstrap_format" {
  type = string
}

variable "failure_domain" {
  type    = string
  default = null
}

variable "kubernetes_version" {
  type    = string
  default = null
}

variable "control_plane" {
  type = bool
}

# User variables, each with a default.

variable "address" {
  type    = string
  default = "10.0.0.10"
}

variable "instance_type" {
  type    = string
  default = "small"
}

# The bench's cloud: seconds each Job spends reading the instance (every plan and
# refresh reads it) and creating it (an apply that creates the instance).
variable "read_seconds" {
  type    = number
  default = 2
}

variable "create_seconds" {
  type    = number
  default = 2
}
