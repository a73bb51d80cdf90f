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

# User variables.

# Where the group's API reports its size: a file standing in for the cloud's
# autoscaling group, which the test writes outside Cluster API. Null: no group API,
# the group holds the replicas asked for.
variable "group_file" {
  type    = string
  default = null
}
