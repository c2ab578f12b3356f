package dev.sluice.spark.ops;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import org.apache.spark.serializer.DeserializationStream;
import org.apache.spark.serializer.SerializationStream;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.serializer.SerializerInstance;
import scala.reflect.ClassTag;

/**
 * The marker serializer of an offloaded operator shuffle ({@link dev.sluice.spark.Sluice}): it
 * carries the {@link OpSpec} from the driver to {@link
 * dev.sluice.spark.SluiceShuffleManager#registerShuffle}, which gives the shuffle to the engine.
 * Records never pass through it: map tasks write engine records ({@link SluiceOpWriter}) and reduce
 * tasks hand fetched blocks to the native aggregate ({@link SluiceOpReader}). On the reduce side
 * Spark's reader still opens a deserialization stream per fetched segment: it reads the segment to
 * its end (which is what feeds the blocks to the engine) and yields no records.
 */
public final class SluiceOpSerializer extends Serializer implements Serializable {
  private static final long serialVersionUID = 1L;

  public final OpSpec op;

  public SluiceOpSerializer(OpSpec op) {
    this.op = op;
  }

  @Override
  public SerializerInstance newInstance() {
    return new Instance();
  }

  private static final class Instance extends SerializerInstance {
    private static UnsupportedOperationException refused() {
      return new UnsupportedOperationException(
          "records of a Sluice operator shuffle are written by the engine, not serialized");
    }

    @Override
    public <T> ByteBuffer serialize(T t, ClassTag<T> tag) {
      throw refused();
    }

    @Override
    public <T> T deserialize(ByteBuffer bytes, ClassTag<T> tag) {
      throw refused();
    }

    @Override
    public <T> T deserialize(ByteBuffer bytes, ClassLoader loader, ClassTag<T> tag) {
      throw refused();
    }

    @Override
    public SerializationStream serializeStream(OutputStream s) {
      throw refused();
    }

    @Override
    public DeserializationStream deserializeStream(InputStream s) {
      return new Drain(s);
    }
  }

  /** Reads its stream to the end, then reports end of stream: no records. */
  private static final class Drain extends DeserializationStream {
    private final InputStream in;

    Drain(InputStream in) {
      this.in = in;
    }

    /**
     * Spark's iterators end at an {@link EOFException} and turn a fetched stream's {@link
     * IOException} into a fetch failure; Scala declares neither, so both are thrown as they are.
     */
    @Override
    public <T> T readObject(ClassTag<T> tag) {
      try {
        byte[] skip = new byte[8192];
        while (in.read(skip) >= 0) {
          // The stream feeds the native aggregate as it is read.
        }
      } catch (IOException e) {
        throw Drain.<RuntimeException>rethrow(e);
      }
      throw Drain.<RuntimeException>rethrow(new EOFException());
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> E rethrow(Throwable t) throws E {
      throw (E) t;
    }

    @Override
    public void close() {
      try {
        in.close();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }
}
