package dev.sluice.spark.service;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A service shuffle's generation and the daemons that own its reduce partitions in it: the
 * daemons (indices into {@link ServiceConf#daemons}, in that order) that registered the
 * generation, owner {@code k} of {@code N} holding the contiguous partitions {@link Nodes#first}
 * gives. Map tasks push and reduce tasks read by the same assignment (it travels in the shuffle's
 * handle), so a daemon left out, down when the generation was registered, is neither pushed to nor
 * read from. Immutable: a new generation is a new assignment.
 */
public final class Assignment implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The shuffle's generation at its owners. */
  public final int generation;

  /** The owning daemons, indices into the configured list, ascending. */
  private final int[] owners;

  public Assignment(int generation, int[] owners) {
    if (owners.length == 0) {
      throw new IllegalArgumentException("an assignment needs at least one daemon");
    }
    this.generation = generation;
    this.owners = owners.clone();
  }

  /** The owners: how many daemons split the shuffle's partitions. */
  public int nodes() {
    return owners.length;
  }

  /** The configured index of owner {@code k}. */
  public int daemon(int k) {
    return owners[k];
  }

  /** Whether daemon {@code d} (a configured index) is one of the owners. */
  public boolean owns(int d) {
    for (int o : owners) {
      if (o == d) {
        return true;
      }
    }
    return false;
  }

  /** The owner ({@code 0..nodes()}) of reduce partition {@code r} of {@code partitions}. */
  public int ownerOf(int r, int partitions) {
    return Nodes.of(r, partitions, owners.length);
  }

  /** The first partition owner {@code k} holds ({@code partitions} for {@code k = nodes()}). */
  public int first(int k, int partitions) {
    return Nodes.first(k, partitions, owners.length);
  }

  /** The owners' addresses, for logs. */
  public List<String> addresses(ServiceConf conf) {
    List<String> a = new ArrayList<>(owners.length);
    for (int d : owners) {
      a.add(conf.daemons.get(d));
    }
    return a;
  }

  @Override
  public String toString() {
    return "generation " + generation + " over daemons " + Arrays.toString(owners);
  }
}
