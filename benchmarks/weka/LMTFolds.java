// Builds Weka's trees.LMT with its default options on each ARFF file named on
// the command line and prints, per file, the number of LogitBoost iterations
// its cross-validation chose at the root and the number of leaves.
//
// Compile and run (Debian's weka package puts weka.jar in /usr/share/java):
//   javac -cp /usr/share/java/weka.jar LMTFolds.java
//   java -cp /usr/share/java/weka.jar:. LMTFolds fold0.arff fold1.arff ...

import java.io.BufferedReader;
import java.io.FileReader;
import java.lang.reflect.Field;

import weka.classifiers.trees.lmt.LogisticBase;
import weka.classifiers.trees.LMT;
import weka.core.Instances;

public class LMTFolds {
    public static void main(String[] args) throws Exception {
        for (String path : args) {
            Instances data;
            try (BufferedReader reader = new BufferedReader(new FileReader(path))) {
                data = new Instances(reader);
            }
            data.setClassIndex(data.numAttributes() - 1);
            LMT lmt = new LMT();
            lmt.buildClassifier(data);
            // The iteration count chosen at the root is kept in the root
            // node's (a LogisticBase) m_fixedNumIterations; Weka prints only
            // the resulting models, so it is read by reflection.
            Field tree = LMT.class.getDeclaredField("m_tree");
            tree.setAccessible(true);
            Object root = tree.get(lmt);
            Field iters = LogisticBase.class.getDeclaredField("m_fixedNumIterations");
            iters.setAccessible(true);
            System.out.println(path + "\t" + iters.getInt(root) + "\t"
                + (int) lmt.measureNumLeaves());
        }
    }
}
