#!/usr/bin/env node
// `leasehold-sink` from an install of @leasehold/cli: the sink package's own entry.
import '@leasehold/sink/main';
