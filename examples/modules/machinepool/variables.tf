# The machinepool role's contract inputs (v1alpha1), as the generated root passes them.

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

variable "captf_cluster_outputs" {
  type    = any
  default = null
}

variable "machinepool_name" {
  type = string
}

# The group's desired capacity.
variable "replicas" {
  type = number
}

variable "bootstrap_data" {
  type      = string
  sensitive = true
}

variable "bootstrap_format" {
  type = string
}

variable "failure_domains" {
  type = list(string)
}

variable "cluster_failure_domains" {
  type = list(string)
}

variable "kubernetes_version" {
  type    = string
  default = null
}

variable "node_labels" {
  type = map(string)
}

variable "autoscaling" {
  type = object({ enabled = bool, min = number, max = number })
}

# User variables, each with a default.

variable "instance_type" {
  type    = string
  default = "small"
}
