# `captf bench fleet`'s machine module: the example machine module with a cloud that
# takes time. The instance is a terraform_data whose creation sleeps (a local-exec
# provisioner), and the instance is read back on every plan and refresh by a
# local_command data source that sleeps: a provisioner runs only when its resource is
# created, so without the read a health re-read or drift check would take no time at
# all, where a real cloud's read takes a call or several. Runs offline.

terraform {
  required_providers {
    local = {
      source = "hashicorp/local"
    }
  }
}

data "local_command" "read" {
  command   = "sleep"
  arguments = [tostring(var.read_seconds)]
}

resource "terraform_data" "instance" {
  input = {
    tags          = var.captf_tags
    name          = var.machine_name
    instance_type = var.instance_type
    network_id    = try(var.captf_cluster_outputs.network_id, null)
    zone          = var.failure_domain
    control_plane = var.control_plane
    # Hashed, so the payload (which may hold private keys) is not kept in state.
    user_data_sha = sha256(var.bootstrap_data)
  }

  provisioner "local-exec" {
    command = "sleep ${var.create_seconds}"
  }
}

output "provider_id" {
  value = "captf://${var.captf_cluster.name}/${var.machine_name}"
}

output "addresses" {
  value = [
    { type = "InternalIP", address = var.address },
    { type = "Hostname", address = var.machine_name },
  ]
}

output "failure_domain" {
  value = var.failure_domain
}

output "interruptible" {
  value = false
}

# The read's exit code is part of the health, so the read is never left out of a plan.
output "health" {
  value = {
    state   = data.local_command.read.exit_code == 0 ? "running" : "unknown"
    healthy = true
    message = null
    reasons = []
  }
}
