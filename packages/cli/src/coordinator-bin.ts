#!/usr/bin/env node
// `leasehold-coordinator` from an install of @leasehold/cli: the coordinator package's own entry.
import '@leasehold/coordinator/main';
