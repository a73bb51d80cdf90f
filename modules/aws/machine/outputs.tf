# The machine role's contract outputs (v1alpha1).

# What Kubernetes' AWS cloud provider writes into the Node: aws:///<zone>/<instance id>.
output "provider_id" {
  value = "aws:///${local.seen.zone}/${local.seen.id}"
}

output "addresses" {
  value = [
    for address in [
      { type = "InternalIP", address = local.seen.private_ip },
      { type = "InternalDNS", address = local.seen.private_dns },
      { type = "ExternalIP", address = local.seen.public_ip },
      { type = "ExternalDNS", address = local.seen.public_dns },
    ] : address if address.address != null && address.address != ""
  ]
}

output "failure_domain" {
  value = local.seen.zone
}

output "interruptible" {
  value = false
}

output "health" {
  value = {
    state   = local.state
    healthy = local.state == "running"
    message = "EC2 instance ${local.seen.id} is ${local.state}"
    reasons = []
  }
}
