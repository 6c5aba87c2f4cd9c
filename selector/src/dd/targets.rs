//! What a selector needs to know about a structure's decode targets, derived once per
//! structure: each target's layer, the chain that protects it, and which targets a receiver of
//! one target can also decode.

use rtp_ext::dd::{DecodeTargetIndication, FrameDependencyStructure, MAX_DECODE_TARGETS};

use crate::layer::Layer;

#[derive(Debug, Clone)]
pub struct DecodeTargets {
    count: usize,
    chain_count: u8,
    layer: [Layer; MAX_DECODE_TARGETS],
    protected_by: [Option<u8>; MAX_DECODE_TARGETS],
    /// For decode target `d`, bit `e` set when every template of `e` is also part of `d`: a
    /// receiver of `d`'s frames has all of `e`'s. This is the active decode targets bitmask to
    /// tell that receiver, and the set `d` may switch down to at once.
    contains: [u32; MAX_DECODE_TARGETS],
    /// Decode targets ordered best layer first, so choosing a target needs no sort per frame.
    best_first: [u8; MAX_DECODE_TARGETS],
}

impl DecodeTargets {
    pub fn new(structure: &FrameDependencyStructure) -> Self {
        let count = usize::from(structure.decode_target_count).min(MAX_DECODE_TARGETS);
        let mut targets = Self {
            count,
            chain_count: structure.chain_count,
            layer: [Layer::BASE; MAX_DECODE_TARGETS],
            protected_by: [None; MAX_DECODE_TARGETS],
            contains: [0; MAX_DECODE_TARGETS],
            best_first: [0; MAX_DECODE_TARGETS],
        };
        let presence = |dt: usize| -> u64 {
            let present = |t: &rtp_ext::dd::FrameDependencyTemplate| {
                t.dtis.get(dt) != DecodeTargetIndication::NotPresent
            };
            // At most 64 templates: one bit each.
            structure
                .templates
                .iter()
                .enumerate()
                .filter(|(_, t)| present(t))
                .fold(0, |mask, (i, _)| mask | 1 << i)
        };
        let mut by_target = [0u64; MAX_DECODE_TARGETS];
        for (dt, mask) in by_target.iter_mut().enumerate().take(count) {
            *mask = presence(dt);
        }
        let presence = by_target;
        for dt in 0..count {
            let layer = structure.decode_target_layer(dt);
            targets.layer[dt] = Layer::new(layer.spatial_id, layer.temporal_id);
            targets.protected_by[dt] = (structure.chain_count > 0)
                .then(|| structure.decode_target_protected_by.get(dt).copied())
                .flatten();
            targets.contains[dt] = (0..count)
                .filter(|&e| presence[e] & !presence[dt] == 0)
                .fold(0, |mask, e| mask | 1 << e);
        }
        for (slot, dt) in targets.best_first.iter_mut().zip(0u8..) {
            *slot = dt;
        }
        let layers = targets.layer;
        targets.best_first[..count].sort_by_key(|&dt| std::cmp::Reverse(layers[usize::from(dt)]));
        targets
    }

    pub fn layer(&self, dt: usize) -> Layer {
        self.layer[dt]
    }

    pub fn protected_by(&self, dt: usize) -> Option<u8> {
        self.protected_by[dt]
    }

    pub fn has_chains(&self) -> bool {
        self.chain_count > 0
    }

    /// Decode targets a receiver of `dt`'s frames can decode.
    pub fn contained_in(&self, dt: usize) -> u32 {
        self.contains[dt]
    }

    /// Decode targets within `limit` that `usable` allows, best first.
    pub fn candidates(&self, limit: Layer, usable: u32) -> impl Iterator<Item = usize> + '_ {
        self.best_first[..self.count]
            .iter()
            .map(|&dt| usize::from(dt))
            .filter(move |&dt| usable & (1 << dt) != 0 && limit.covers(self.layer[dt]))
    }

    /// Decode targets whose layer is exactly `layer`.
    pub fn of_layer(&self, layer: Layer) -> u32 {
        (0..self.count)
            .filter(|&dt| self.layer[dt] == layer)
            .fold(0, |mask, dt| mask | 1 << dt)
    }

    /// Chains that protect a decode target of `mask`: the chains a receiver of those targets
    /// must keep, and so the writer's active chains.
    pub fn chains_of(&self, mask: u32) -> u32 {
        (0..self.count)
            .filter(|&dt| mask & (1 << dt) != 0)
            .filter_map(|dt| self.protected_by[dt])
            .fold(0, |chains, c| chains | 1 << c)
    }
}
