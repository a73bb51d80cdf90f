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

# The cluster module's exports (modules/aws/cluster).
variable "captf_cluster_outputs" {
  type    = any
  default = null
}

variable "machine_name" {
  type = string
}

# Base64 of the bootstrap Secret's value: the instance's user data as it is.
variable "bootstrap_data" {
  type      = string
  sensitive = true
}

variable "bootstrap_format" {
  type = string
}

# An availability zone of the cluster; null takes the first.
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

variable "instance_type" {
  description = "The EC2 instance type."
  type        = string
  default     = "m6i.large"
}

variable "ami_id" {
  description = "The image to boot; null takes the newest image named ami_name owned by ami_owners."
  type        = string
  default     = null
}

variable "ami_name" {
  description = "The name pattern of the image looked up when ami_id is null."
  type        = string
  default     = "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*"
}

variable "ami_owners" {
  description = "Who may own the image looked up (099720109477 is Canonical)."
  type        = list(string)
  default     = ["099720109477"]
}

variable "key_name" {
  description = "An EC2 key pair to log in with; null for none."
  type        = string
  default     = null
}

variable "root_volume_size" {
  description = "GiB of the root volume."
  type        = number
  default     = 40
}

variable "root_volume_type" {
  description = "The root volume's EBS type."
  type        = string
  default     = "gp3"
}

variable "instance_profile" {
  description = "The IAM instance profile of a worker; null for none."
  type        = string
  default     = null
}

variable "control_plane_instance_profile" {
  description = "The IAM instance profile of a control plane machine; null for none."
  type        = string
  default     = null
}

variable "additional_security_group_ids" {
  description = "Security groups the instance joins beside the cluster's."
  type        = list(string)
  default     = []
}
