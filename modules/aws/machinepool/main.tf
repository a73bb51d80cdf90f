# A Cluster API MachinePool on AWS: a launch template (the image, the type, the
# bootstrap data as user data) and an Auto Scaling group across the pool's failure
# domains. Its members are the group's live instances, read from EC2 at every refresh,
# so a group resized outside Cluster API shows as it is.

locals {
  exports = var.captf_cluster_outputs
  subnets = try(local.exports.subnet_ids, {})
  zones = (
    length(var.failure_domains) > 0 ? var.failure_domains
    : length(var.cluster_failure_domains) > 0 ? var.cluster_failure_domains
    : sort(keys(local.subnets))
  )
  # Unique per object, within the 255 characters of a group and 128 of a template name.
  name = "captf-${substr(sha1("${var.captf_object.namespace}/${var.captf_object.name}"), 0, 12)}"
  tags = merge(var.tags, var.captf_tags, {
    Name                                              = var.machinepool_name
    "kubernetes.io/cluster/${var.captf_cluster.name}" = "owned"
  })
  # The cluster-autoscaler's AWS provider reads a group's node labels from these tags
  # when it scales from zero; the members' kubelets get them from the bootstrap data.
  label_tags = {
    for key, value in var.node_labels : "k8s.io/cluster-autoscaler/node-template/label/${key}" => value
  }
  min_size = var.autoscaling.enabled ? var.autoscaling.min : 0
  max_size = var.autoscaling.enabled ? var.autoscaling.max : max(var.replicas, var.max_size)
}

data "aws_ami" "named" {
  count       = var.ami_id == null ? 1 : 0
  most_recent = true
  owners      = var.ami_owners

  filter {
    name   = "name"
    values = [var.ami_name]
  }
}

data "aws_ami" "chosen" {
  filter {
    name   = "image-id"
    values = [var.ami_id != null ? var.ami_id : data.aws_ami.named[0].id]
  }
}

resource "aws_launch_template" "this" {
  name                   = local.name
  image_id               = data.aws_ami.chosen.id
  instance_type          = var.instance_type
  key_name               = var.key_name
  user_data              = var.bootstrap_data
  vpc_security_group_ids = concat([local.exports.node_security_group_id], var.additional_security_group_ids)
  update_default_version = true

  dynamic "iam_instance_profile" {
    for_each = var.instance_profile == null ? [] : [var.instance_profile]
    content {
      name = iam_instance_profile.value
    }
  }

  block_device_mappings {
    device_name = data.aws_ami.chosen.root_device_name
    ebs {
      volume_size = var.root_volume_size
      volume_type = var.root_volume_type
      encrypted   = true
    }
  }

  metadata_options {
    http_tokens                 = "required"
    http_put_response_hop_limit = 2
  }

  # The template itself carries no tags: its members and their volumes do, and the
  # group does (moto echoes a template's own tags into its data, a diff every plan).
  tag_specifications {
    resource_type = "instance"
    tags          = local.tags
  }

  tag_specifications {
    resource_type = "volume"
    tags          = local.tags
  }
}

resource "aws_autoscaling_group" "this" {
  name                      = local.name
  desired_capacity          = var.replicas
  min_size                  = local.min_size
  max_size                  = local.max_size
  vpc_zone_identifier       = [for zone in local.zones : local.subnets[zone]]
  wait_for_capacity_timeout = var.wait_for_capacity_timeout

  launch_template {
    id      = aws_launch_template.this.id
    version = aws_launch_template.this.latest_version
  }

  # A new template version (other bootstrap data, another image) replaces the members
  # a few at a time.
  instance_refresh {
    strategy = "Rolling"
  }

  dynamic "tag" {
    for_each = merge(local.tags, local.label_tags)
    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = false
    }
  }
}

# The group as EC2 Auto Scaling reports it now, and its live members, zone by zone (a
# provider ID names the zone).
data "aws_autoscaling_group" "observed" {
  name = aws_autoscaling_group.this.name
}

data "aws_instances" "members" {
  for_each = toset(local.zones)

  instance_state_names = ["pending", "running"]
  filter {
    name   = "tag:aws:autoscaling:groupName"
    values = [aws_autoscaling_group.this.name]
  }
  filter {
    name   = "availability-zone"
    values = [each.key]
  }
}

locals {
  # EC2 lists a private address only for an instance that has one: the two lists line
  # up only when every member has one (a pending member may not yet).
  members = flatten([
    for zone, found in data.aws_instances.members : [
      for index, id in found.ids : {
        provider_id    = "aws:///${zone}/${id}"
        instance_id    = id
        failure_domain = zone
        addresses = (
          length(found.private_ips) == length(found.ids)
          ? [{ type = "InternalIP", address = found.private_ips[index] }]
          : []
        )
      }
    ]
  ])
  desired = data.aws_autoscaling_group.observed.desired_capacity
}
