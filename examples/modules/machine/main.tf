# A machine module with no cloud: one terraform_data is the instance. Runs offline.

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
}

# The string a Node of this machine would carry in spec.providerID.
output "provider_id" {
  value = "captf://${var.captf_cluster.name}/${var.machine_name}"
}

output "addresses" {
  value = [
    { type = "InternalIP", address = var.address },
    { type = "Hostname", address = var.machine_name },
  ]
}

# Placed where asked; with no request, nowhere in particular.
output "failure_domain" {
  value = var.failure_domain
}

output "interruptible" {
  value = false
}

output "health" {
  value = { state = "running", healthy = true, message = null, reasons = [] }
}
